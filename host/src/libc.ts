// The few system calls the CLI makes before and around its first request,
// through libc by bun:ffi, loaded once: `isatty`, `fcntl` and `statx`.
// Importing node:fs costs ~4 ms of a compiled CLI's start here and
// node:tty ~2.5 ms, against ~2.3 ms for the one dlopen every caller shares
// (scripts/bench/README.md, cli.ts). statx's buffer has one layout on every
// Linux architecture, which stat's has not. Where libc cannot be loaded (no
// glibc, other systems) each caller falls back on node:fs or node:tty.
import type { Pointer } from "bun:ffi";

interface Libc {
  isatty(fd: number): number;
  fcntl(fd: number, cmd: number, arg: number): number;
  statx(dirfd: number, path: Uint8Array, flags: number, mask: number, buf: Uint8Array): number;
  errno(): number;
}

let loaded: Libc | null | undefined;

/** libc's functions, or null where they cannot be had (not Linux, no glibc). */
export function libc(): Libc | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.platform !== "linux") return null;
  try {
    const { dlopen, FFIType, read } = require("bun:ffi") as typeof import("bun:ffi");
    const { symbols: s } = dlopen("libc.so.6", {
      isatty: { args: [FFIType.i32], returns: FFIType.i32 },
      fcntl: { args: [FFIType.i32, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
      statx: { args: [FFIType.i32, FFIType.ptr, FFIType.i32, FFIType.u32, FFIType.ptr], returns: FFIType.i32 },
      __errno_location: { args: [], returns: FFIType.ptr },
    });
    loaded = {
      isatty: (fd) => s.isatty(fd),
      fcntl: (fd, cmd, arg) => s.fcntl(fd, cmd, arg),
      statx: (dirfd, path, flags, mask, buf) => s.statx(dirfd, path, flags, mask, buf),
      errno: () => read.i32(s.__errno_location() as Pointer, 0),
    };
  } catch {
    // no glibc: every caller has its fallback
  }
  return loaded;
}

const AT_FDCWD = -100;
const AT_EMPTY_PATH = 0x1000;
const STATX_TYPE = 0x1;
const STATX_MODE = 0x2;
const STATX_UID = 0x8;
const ENOENT = 2;
const S_IFMT = 0o170000;

/** What the CLI asks of a path or fd: its type bits with its mode, its owner, and the device it is (for a device file). */
export interface Stat {
  /** st_mode: type and permission bits. */
  mode: number;
  uid: number;
  rdev: { major: number; minor: number };
}
export const S_IFDIR = 0o040000;
export const S_IFIFO = 0o010000;
export const S_IFCHR = 0o020000;
export const fileType = (st: Pick<Stat, "mode">) => st.mode & S_IFMT;

/**
 * A path's (symlinks followed) or an open fd's type, mode and owner; null
 * when the path does not exist; undefined where libc is not to be had or
 * the call failed otherwise (the caller asks node:fs, whose error says why).
 */
export function statOf(target: string | number): Stat | null | undefined {
  const c = libc();
  if (!c) return undefined;
  const buf = new Uint8Array(256);
  const byFd = typeof target === "number";
  const path = new TextEncoder().encode(byFd ? "\0" : `${target}\0`);
  const rc = c.statx(byFd ? target : AT_FDCWD, path, byFd ? AT_EMPTY_PATH : 0, STATX_TYPE | STATX_MODE | STATX_UID, buf);
  if (rc !== 0) return c.errno() === ENOENT ? null : undefined;
  // struct statx: stx_uid at 20 (u32), stx_mode at 28 (u16), stx_rdev_major and
  // stx_rdev_minor at 128 and 132 (u32, filled whatever the mask); the same on every architecture.
  const view = new DataView(buf.buffer);
  return {
    uid: view.getUint32(20, true),
    mode: view.getUint16(28, true),
    rdev: { major: view.getUint32(128, true), minor: view.getUint32(132, true) },
  };
}

/** Whether a path exists (symlinks followed), as node:fs's existsSync answers, without loading node:fs where libc is there. */
export function exists(path: string): boolean {
  const st = statOf(path);
  if (st !== undefined) return st !== null;
  return nodeFs().existsSync(path);
}

/** node:fs, loaded the first time a path off the CLI's request path needs it (its import alone is ~4 ms). */
export const nodeFs = () => require("node:fs") as typeof import("node:fs");
