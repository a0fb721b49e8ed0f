// Every environment variable hutch reads is read here, once
// (host/test/imports.test.ts fails for a read anywhere else). The whole
// environment leaves this module only through `all()`, for the two uses that
// are about every variable rather than one: a child that inherits the
// caller's environment, and the offload's scan for credential-looking values.
import { homedir } from "node:os";
import { join } from "node:path";

function xdgDataHome(): string {
  return process.env.XDG_DATA_HOME || join(homedir(), ".local", "share");
}

function xdgConfigHome(): string {
  return process.env.XDG_CONFIG_HOME || join(homedir(), ".config");
}

/** The variables the local agent CLIs find their stores by, as they resolve them. */
function agentStores(vars: Record<string, string | undefined>): { claude: string; codex: string; pi: string } {
  const home = vars.HOME || homedir();
  return {
    claude: vars.CLAUDE_CONFIG_DIR || join(home, ".claude"),
    codex: vars.CODEX_HOME || join(home, ".codex"),
    pi: vars.PI_CODING_AGENT_DIR || join(home, ".pi", "agent"),
  };
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
  /**
   * How long a fleet server's write to its NATS cluster (a snapshot's
   * objects, a session's records) keeps retrying while the cluster does not
   * answer before it fails naming the cluster (host/src/fleet/README.md).
   */
  clusterWriteTimeoutMs: () => {
    const ms = intFromEnv("HUTCH_CLUSTER_WRITE_TIMEOUT_MS", 30_000);
    if (ms < 100) throw new Error(`HUTCH_CLUSTER_WRITE_TIMEOUT_MS=${ms}: at least 100 (milliseconds)`);
    return ms;
  },
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
  configDir: () => join(xdgConfigHome(), "hutch"),
  /**
   * What hutch keeps for the machine that can be rebuilt at any time (apt's
   * binary package caches): /var/cache/hutch for root, else
   * $XDG_CACHE_HOME/hutch (default ~/.cache/hutch).
   */
  cacheDir: () => (process.getuid?.() === 0 ? "/var/cache/hutch" : join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "hutch")),
  /** The user's config directory ($XDG_CONFIG_HOME, default ~/.config): where a --user-unit goes. */
  xdgConfigHome,
  /**
   * Where the local Claude Code, Codex and pi keep their conversations
   * ($CLAUDE_CONFIG_DIR, $CODEX_HOME, $PI_CODING_AGENT_DIR, under $HOME by
   * default); `vars` stands in for the environment (tests, a caller's own).
   */
  agentStores: (vars: Record<string, string | undefined> = process.env) => agentStores(vars),
  /** The caller's PATH, for a child started with a minimal environment. */
  path: (): string | undefined => process.env.PATH,
  /** The whole environment: for a child that inherits it, or a scan over every variable. */
  all: (): Record<string, string | undefined> => process.env,
  /** --remote for the rest of this process and what it starts (attach, the IDE bridge), which read HUTCH_REMOTE. */
  setRemote: (name: string) => {
    process.env.HUTCH_REMOTE = name;
  },
  /** An optional name telling clients of one kind apart (e.g. two agents). */
  clientName: () => process.env.HUTCH_CLIENT_NAME || undefined,
};
