// Every environment variable hutch reads is read here, once.
import { homedir } from "node:os";
import { join } from "node:path";

function xdgDataHome(): string {
  return process.env.XDG_DATA_HOME || join(homedir(), ".local", "share");
}

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name}=${raw} is not a whole number`);
  return n;
}

export const env = {
  /** Root of all hutch state. */
  home: () => process.env.HUTCH_HOME || join(xdgDataHome(), "hutch"),
  /** Use this guest binary instead of the embedded one (development and fault-injection tests). */
  guestBinary: () => process.env.HUTCH_GUEST_BIN || undefined,
  /** How long a started guest has to answer the hello (each engine has its own default). */
  helloTimeoutMs: (): number | undefined => (process.env.HUTCH_HELLO_TIMEOUT_MS ? intFromEnv("HUTCH_HELLO_TIMEOUT_MS", 0) : undefined),
  /** The most of a VM's serial console the host keeps in console.log (plus one 64 KiB tail in console.log.1). */
  consoleMaxBytes: () => intFromEnv("HUTCH_CONSOLE_MAX_BYTES", 8 * 1024 * 1024),
  /**
   * The most raw terminal output kept per session, per box (all its sessions)
   * and per user (all their sessions): each a rolling window, the oldest
   * chunks dropped first (host/src/session/README.md, "Output caps").
   */
  ptyMaxBytes: () => ({
    session: intFromEnv("HUTCH_PTY_SESSION_MAX_BYTES", 64 * 1024 * 1024),
    box: intFromEnv("HUTCH_PTY_BOX_MAX_BYTES", 256 * 1024 * 1024),
    user: intFromEnv("HUTCH_PTY_USER_MAX_BYTES", 1024 * 1024 * 1024),
  }),
  /** How long a graceful stop waits before killing. */
  stopTimeoutMs: () => intFromEnv("HUTCH_STOP_TIMEOUT_MS", 10_000),
  logLevel: () => process.env.HUTCH_LOG_LEVEL || undefined,
  logFormat: () => process.env.HUTCH_LOG_FORMAT || undefined,
  bwrap: () => process.env.HUTCH_BWRAP || "bwrap",
  /** Force the QEMU accelerator (kvm, hvf, whpx, tcg) instead of the one doctor proved. */
  qemuAccel: () => {
    const v = process.env.HUTCH_QEMU_ACCEL;
    if (!v) return undefined;
    if (!["kvm", "hvf", "whpx", "tcg"].includes(v)) throw new Error(`HUTCH_QEMU_ACCEL=${v}: expected kvm, hvf, whpx or tcg`);
    return v;
  },
  /** Where agent CLIs are installed (default $HUTCH_HOME/agents); shared read-only with process boxes. */
  agentsDir: (home: string) => process.env.HUTCH_AGENTS_DIR || join(home, "agents"),
  /** Host directories every process box also sees read-only (colon-separated, e.g. /opt); none by default. */
  boxHostDirs: (): string[] => (process.env.HUTCH_BOX_HOST_DIRS ?? "").split(":").filter((d) => d.length > 0),
  /** Install a missing agent CLI with npm when a session needs it (HUTCH_AGENT_INSTALL=0 on hosts without the registry). */
  agentInstall: () => process.env.HUTCH_AGENT_INSTALL !== "0",
  /** What kind of client this CLI declares itself to the daemon: cli, agent, ide, orchestrator. */
  clientKind: () => process.env.HUTCH_CLIENT || "cli",
  /** The remote (server mode) every verb talks to unless --remote says otherwise; `local`: the home's daemon. */
  remote: () => process.env.HUTCH_REMOTE || undefined,
  /** Where the client keeps its remotes (`remotes.json`). */
  configDir: () => join(process.env.XDG_CONFIG_HOME || join(homedir(), ".config"), "hutch"),
  /** An optional name telling clients of one kind apart (e.g. two agents). */
  clientName: () => process.env.HUTCH_CLIENT_NAME || undefined,
};
