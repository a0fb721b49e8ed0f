// The two things node:fs cannot do that a faithful restore needs: set
// mtimes to the nanosecond (fs.utimes takes float seconds, ~240 ns off at
// today's dates) and read and write extended attributes. Both go to libc
// through bun:ffi (utimensat, futimens, llistxattr, lgetxattr, lsetxattr; never
// following a symlink). Where libc cannot be loaded (not Linux, or no glibc)
// times fall back to lutimes at microsecond precision and xattrs are neither
// read nor written: `capabilities` says which.
import { futimesSync, lutimesSync } from "node:fs";
import { dlopen, FFIType, ptr } from "bun:ffi";

const AT_FDCWD = -100;
const AT_SYMLINK_NOFOLLOW = 0x100;
const ERANGE_RETRIES = 3;

interface Libc {
  utimensat(dirfd: number, path: Uint8Array, times: BigInt64Array, flags: number): number;
  futimens(fd: number, times: BigInt64Array): number;
  llistxattr(path: Uint8Array, list: Uint8Array | null, size: number): number;
  lgetxattr(path: Uint8Array, name: Uint8Array, value: Uint8Array | null, size: number): number;
  lsetxattr(path: Uint8Array, name: Uint8Array, value: Uint8Array, size: number, flags: number): number;
}

let libc: Libc | null | undefined;

function load(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  if (process.platform !== "linux") return null;
  try {
    const { i32, i64, ptr: p, u64 } = FFIType;
    const lib = dlopen("libc.so.6", {
      utimensat: { args: [i32, p, p, i32], returns: i32 },
      futimens: { args: [i32, p], returns: i32 },
      llistxattr: { args: [p, p, u64], returns: i64 },
      lgetxattr: { args: [p, p, p, u64], returns: i64 },
      lsetxattr: { args: [p, p, p, u64, i32], returns: i32 },
    });
    const s = lib.symbols;
    libc = {
      utimensat: (d, path, times, flags) => s.utimensat(d, ptr(path), ptr(times), flags),
      futimens: (fd, times) => s.futimens(fd, ptr(times)),
      llistxattr: (path, list, size) => Number(s.llistxattr(ptr(path), list ? ptr(list) : null, size)),
      lgetxattr: (path, name, value, size) => Number(s.lgetxattr(ptr(path), ptr(name), value ? ptr(value) : null, size)),
      lsetxattr: (path, name, value, size, flags) => s.lsetxattr(ptr(path), ptr(name), value.length > 0 ? ptr(value) : null, size, flags),
    };
  } catch {
    // No glibc: the fallbacks below.
  }
  return libc;
}

export const capabilities = {
  get nanosecondTimes(): boolean {
    return load() !== null;
  },
  get xattrs(): boolean {
    return load() !== null;
  },
};

function cstr(s: string): Uint8Array {
  return Buffer.from(`${s}\0`, "utf8");
}

/** atime and mtime as two timespecs, `ns` nanoseconds since the epoch. */
function timespecs(ns: bigint): BigInt64Array {
  const sec = ns >= 0n ? ns / 1_000_000_000n : -((-ns + 999_999_999n) / 1_000_000_000n);
  const nsec = ns - sec * 1_000_000_000n;
  return new BigInt64Array([sec, nsec, sec, nsec]);
}

/** Sets atime and mtime of `path` (never through a symlink) to `ns` nanoseconds since the epoch. */
export function setTimes(path: string, ns: bigint): void {
  const c = load();
  if (!c) {
    const s = Number(ns) / 1e9;
    lutimesSync(path, s, s);
    return;
  }
  if (c.utimensat(AT_FDCWD, cstr(path), timespecs(ns), AT_SYMLINK_NOFOLLOW) !== 0) throw new Error(`utimensat ${path} failed`);
}

/** The same through an open file descriptor (`path` only names it in errors): no path lookup. */
export function setFdTimes(fd: number, path: string, ns: bigint): void {
  const c = load();
  if (!c) {
    const s = Number(ns) / 1e9;
    futimesSync(fd, s, s);
    return;
  }
  if (c.futimens(fd, timespecs(ns)) !== 0) throw new Error(`futimens ${path} failed`);
}

/** The extended attributes of `path` (not following a symlink), sorted by name; empty when there are none or they are unsupported. */
export function readXattrs(path: string): [string, Uint8Array][] {
  const c = load();
  if (!c) return [];
  const p = cstr(path);
  for (let attempt = 0; attempt < ERANGE_RETRIES; attempt++) {
    const size = c.llistxattr(p, null, 0);
    if (size <= 0) return [];
    const list = new Uint8Array(size);
    const got = c.llistxattr(p, list, size);
    if (got < 0) continue; // grew between the calls (ERANGE)
    const names = Buffer.from(list.subarray(0, got))
      .toString("utf8")
      .split("\0")
      .filter((n) => n !== "");
    const out: [string, Uint8Array][] = [];
    for (const name of names.sort()) {
      const n = cstr(name);
      const len = c.lgetxattr(p, n, null, 0);
      if (len < 0) continue;
      const value = new Uint8Array(len);
      const read = len === 0 ? 0 : c.lgetxattr(p, n, value, len);
      if (read >= 0) out.push([name, value.subarray(0, read)]);
    }
    return out;
  }
  return [];
}

/** Sets one extended attribute (not following a symlink); false when the filesystem or the namespace refuses it. */
export function writeXattr(path: string, name: string, value: Uint8Array): boolean {
  const c = load();
  if (!c) return false;
  return c.lsetxattr(cstr(path), cstr(name), value, value.length, 0) === 0;
}
