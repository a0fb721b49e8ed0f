// Which of the host's directories a process box sees, read-only: the system
// directories programs need (/usr and its merged-/usr links), and only those.
// /opt and anything else the host keeps stay out unless the daemon's operator
// names them in HUTCH_BOX_HOST_DIRS (as Docker mounts nothing of the host's
// without -v); README.md beside this file says why it is the daemon's choice
// and not a box's.
import { lstatSync, readlinkSync } from "node:fs";
import { normalize } from "node:path";
import { HutchError } from "@hutch/shared";
import type { HostEntry } from "./bwrap-args.ts";

export const SYSTEM_DIRS = ["/usr", "/bin", "/lib", "/lib64", "/sbin", "/lib32", "/libx32"];

/** Paths the sandbox makes itself, or that hold what no box may read: an extra host directory may be none of them, nor under one. */
const RESERVED = ["/proc", "/sys", "/dev", "/etc", "/tmp", "/run", "/home", "/root", "/workspace", "/.hutch"];

const within = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);

/**
 * The operator's extra host directories, checked: absolute, normal, not a
 * path the sandbox owns, and not holding the daemon's own state (its home,
 * where tokens and every box's files are). Throws naming the first bad one.
 */
export function extraHostDirs(dirs: string[], daemonHome: string): string[] {
  const out: string[] = [];
  for (const d of dirs) {
    const bad = (why: string) =>
      new HutchError("invalid", `HUTCH_BOX_HOST_DIRS: ${JSON.stringify(d)} ${why}`, "fix HUTCH_BOX_HOST_DIRS and restart the daemon");
    if (d === "/") throw bad("would show the host's whole filesystem");
    if (!d.startsWith("/") || normalize(d) !== d || d.endsWith("/")) throw bad("is not an absolute, normal path (e.g. /opt)");
    const reserved = RESERVED.find((r) => within(d, r) || within(r, d));
    if (reserved) throw bad(`overlaps ${reserved}, which the sandbox provides itself or keeps from boxes`);
    if (within(daemonHome, d) || within(d, daemonHome)) throw bad(`overlaps the daemon's home ${daemonHome}`);
    if (SYSTEM_DIRS.some((s) => within(d, s))) continue;
    try {
      const st = lstatSync(d);
      if (st.isSymbolicLink()) throw bad(`is a symlink (to ${readlinkSync(d)}): name the directory itself`);
      if (!st.isDirectory()) throw bad("is not a directory");
    } catch (err) {
      if (err instanceof HutchError) throw err;
      throw bad("does not exist on this host");
    }
    if (!out.includes(d)) out.push(d);
  }
  return out;
}

/** How each directory appears in the box: merged-/usr symlinks as symlinks, real directories bound read-only. */
export function hostLayout(dirs: string[]): HostEntry[] {
  const out: HostEntry[] = [];
  for (const path of dirs) {
    try {
      const st = lstatSync(path);
      if (st.isSymbolicLink()) out.push({ path, symlink: readlinkSync(path) });
      else if (st.isDirectory()) out.push({ path });
    } catch {
      // absent on this host
    }
  }
  return out;
}
