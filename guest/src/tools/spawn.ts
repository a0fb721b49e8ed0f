// What exec and pty.open share: where a process starts, with what environment,
// and how a failed spawn is reported.
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import type { StreamError } from "@hutch/shared/wire";
import type { GuestConfig } from "../config.ts";

export interface SpawnRequest {
  argv: string[];
  env?: Record<string, string>;
  cwd?: string;
  user?: "hutch" | "root";
}

/** What a process runs as: the uid and gid to spawn with (none: the guest's own) and the identity variables. */
export interface SpawnIdentity {
  uid?: number;
  gid?: number;
  env: Record<string, string>;
}

/**
 * The box's user by default; root where asked and where there is one (a VM).
 * A process box's guest already is the box's user, with nothing to switch to.
 */
export function spawnIdentity(config: GuestConfig, req: SpawnRequest): SpawnIdentity | StreamError {
  const u = config.boxUser;
  if (req.user === "root") {
    if (!u)
      return {
        code: "invalid",
        message:
          "a process box has no root: its processes all run as its user; for root, use a VM box (hutch box create NAME --engine qemu)",
      };
    return { uid: 0, gid: 0, env: { HOME: "/root", USER: "root", LOGNAME: "root" } };
  }
  if (!u) return { env: {} };
  return { uid: u.uid, gid: u.gid, env: { HOME: u.home, USER: u.name, LOGNAME: u.name } };
}

/**
 * The directory a process starts in. Not confined to the roots: exec runs
 * arbitrary commands anyway, so a cwd check would guard nothing.
 */
export async function spawnCwd(config: GuestConfig, req: SpawnRequest): Promise<string | StreamError> {
  const cwd = resolve(config.cwd, req.cwd ?? ".");
  const st = await stat(cwd).catch(() => undefined);
  if (!st) return { code: "not_found", message: `cwd ${cwd}: no such directory` };
  if (!st.isDirectory()) return { code: "invalid", message: `cwd ${cwd}: not a directory` };
  return cwd;
}

export function spawnEnv(
  config: GuestConfig,
  req: SpawnRequest,
  extra: Record<string, string> = {},
  who: SpawnIdentity = { env: {} },
): Record<string, string> {
  return { ...config.baseEnv, ...config.serviceEnv, ...who.env, ...extra, ...req.env };
}

/** Bun.spawn throws synchronously when it cannot start argv[0]. */
export function spawnError(argv0: string, err: unknown): StreamError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return { code: "not_found", message: `${argv0}: command not found` };
  if (code === "EACCES") return { code: "failed", message: `${argv0}: permission denied` };
  return { code: "failed", message: `${argv0}: ${(err as Error).message}` };
}
