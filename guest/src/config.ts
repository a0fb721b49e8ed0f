// Every environment variable the guest reads is read here, once, at start.
import { homedir } from "node:os";

/** Where the host connects: a unix socket, or a virtio-serial port by name. */
export type ChannelSpec = { kind: "unix"; path: string } | { kind: "vport"; name: string };

export interface GuestConfig {
  channel: ChannelSpec;
  /** Directories file tools may touch; anything resolving outside is denied. */
  roots: string[];
  /** Where relative paths and exec/pty without a cwd start. */
  cwd: string;
  /** Environment handed to every process, before the request's own env. */
  baseEnv: Record<string, string>;
  /** Set while a service in the box is up (net.listen's env: the broker's proxy and endpoints); before baseEnv is overridden by requests. */
  serviceEnv: Record<string, string>;
  /** On SIGTERM: how long processes get between SIGTERM and SIGKILL. */
  graceMs: number;
  /** How long a PTY attachment that fell behind may grant no credit before it is dropped. */
  ptyStallMs: number;
  /** Send "level=debug" lines to stderr too. */
  debug: boolean;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): GuestConfig {
  const home = env.HOME || homedir();
  const roots = (env.HUTCH_GUEST_ROOTS ?? `/workspace:${home}`)
    .split(":")
    .filter((r) => r.length > 0);
  return {
    channel: parseChannel(env.HUTCH_GUEST_CHANNEL || `unix:${env.HUTCH_GUEST_SOCKET || "/run/hutch/agent.sock"}`),
    roots: [...new Set(roots)],
    cwd: env.HUTCH_GUEST_CWD || "/workspace",
    baseEnv: baseEnv(env),
    serviceEnv: {},
    graceMs: nonNegative(env.HUTCH_GUEST_GRACE_MS, 5000),
    ptyStallMs: nonNegative(env.HUTCH_GUEST_PTY_STALL_MS, 5000),
    debug: env.HUTCH_GUEST_DEBUG === "1",
  };
}

/** `unix:/path` or `vport:<port name>`. */
export function parseChannel(spec: string): ChannelSpec {
  const colon = spec.indexOf(":");
  const kind = spec.slice(0, colon);
  const rest = spec.slice(colon + 1);
  if (colon > 0 && rest.length > 0) {
    if (kind === "unix") return { kind, path: rest };
    if (kind === "vport") return { kind, name: rest };
  }
  throw new Error(`HUTCH_GUEST_CHANNEL=${JSON.stringify(spec)}: expected unix:/path/to/socket or vport:<port name>`);
}

// Processes get the guest's own environment (PATH, HOME, TERM, LANG…) minus
// the guest's configuration, which means nothing to them.
function baseEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined && !k.startsWith("HUTCH_GUEST_")) out[k] = v;
  }
  return out;
}

function nonNegative(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && value !== "" && Number.isFinite(n) && n >= 0 ? n : fallback;
}
