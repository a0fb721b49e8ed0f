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
  /**
   * Who the box's processes and files belong to when the guest itself is root
   * (a VM's PID 1): uid 1000, unless a request asks for root. null in a process
   * box, where the guest already is the box's user and there is no root.
   */
  boxUser: { uid: number; gid: number; name: string; home: string } | null;
}

/** The box's user: the same in every image and in process boxes (host/src/image/rootfs.ts). */
export const BOX_USER = { uid: 1000, gid: 1000, name: "hutch", home: "/home/hutch" } as const;

/** `vm`: the guest is a VM's PID 1 (root), running the box's processes as the box's user. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, role: { vm: boolean } = { vm: false }): GuestConfig {
  const home = env.HOME || homedir();
  const roots = (env.HUTCH_GUEST_ROOTS ?? `/workspace:${home}`).split(":").filter((r) => r.length > 0);
  return {
    channel: parseChannel(env.HUTCH_GUEST_CHANNEL || `unix:${env.HUTCH_GUEST_SOCKET || "/run/hutch/agent.sock"}`),
    roots: [...new Set(roots)],
    cwd: env.HUTCH_GUEST_CWD || "/workspace",
    baseEnv: baseEnv(env),
    serviceEnv: {},
    graceMs: nonNegative(env.HUTCH_GUEST_GRACE_MS, 5000),
    ptyStallMs: nonNegative(env.HUTCH_GUEST_PTY_STALL_MS, 5000),
    debug: env.HUTCH_GUEST_DEBUG === "1",
    boxUser: role.vm ? BOX_USER : null,
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
