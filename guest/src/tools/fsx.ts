// What node:fs cannot do for a snapshot: extended attributes (llistxattr,
// lgetxattr, lsetxattr) and mtimes to the nanosecond (utimensat; node's
// utimes takes float seconds, ~240 ns off at today's dates), from libc
// through bun:ffi, never following a symlink, loaded on first use. Only the
// user.* namespace crosses the channel: security.* and trusted.* say things
// about the box's kernel (capabilities, labels) that a snapshot must not
// carry into another box.
import { lutimesSync } from "node:fs";
import { dlopen, FFIType } from "bun:ffi";

const { i32, i64, ptr, u64 } = FFIType;
const PREFIX = "user.";
/** At most this many attributes of at most VALUE_MAX bytes each per path, as the store keeps. */
export const XATTR_LIMITS = { count: 256, nameBytes: 255, valueBytes: 64 * 1024 } as const;

function open() {
  return dlopen("libc.so.6", {
    llistxattr: { args: [ptr, ptr, u64], returns: i64 },
    lgetxattr: { args: [ptr, ptr, ptr, u64], returns: i64 },
    lsetxattr: { args: [ptr, ptr, ptr, u64, i32], returns: i32 },
    utimensat: { args: [i32, ptr, ptr, i32], returns: i32 },
  }).symbols;
}

let lib: ReturnType<typeof open> | null | undefined;
function libc(): ReturnType<typeof open> | null {
  if (lib !== undefined) return lib;
  try {
    lib = open();
  } catch {
    // No glibc: a box without xattrs.
    lib = null;
  }
  return lib;
}

const cstr = (s: string) => Buffer.from(`${s}\0`, "utf8");

/** The user.* attributes of `path`, sorted by name, within XATTR_LIMITS; empty when there are none or they are unsupported. */
export function readUserXattrs(path: string): [string, Uint8Array][] {
  const c = libc();
  if (!c) return [];
  const p = cstr(path);
  const size = Number(c.llistxattr(p, null, 0));
  if (size <= 0) return [];
  const list = new Uint8Array(size);
  const got = Number(c.llistxattr(p, list, size));
  if (got <= 0) return [];
  const names = Buffer.from(list.subarray(0, got))
    .toString("utf8")
    .split("\0")
    .filter((n) => n.startsWith(PREFIX) && Buffer.byteLength(n) <= XATTR_LIMITS.nameBytes)
    .sort();
  const out: [string, Uint8Array][] = [];
  for (const name of names) {
    if (out.length >= XATTR_LIMITS.count) break;
    const n = cstr(name);
    const len = Number(c.lgetxattr(p, n, null, 0));
    if (len < 0 || len > XATTR_LIMITS.valueBytes) continue;
    const value = new Uint8Array(Math.max(len, 1));
    const read = len === 0 ? 0 : Number(c.lgetxattr(p, n, value, len));
    if (read >= 0) out.push([name, value.subarray(0, read)]);
  }
  return out;
}

/** Sets one user.* attribute (never through a symlink); false when it is another namespace or the filesystem refuses. */
export function writeUserXattr(path: string, name: string, value: Uint8Array): boolean {
  if (!name.startsWith(PREFIX)) return false;
  const c = libc();
  if (!c) return false;
  const v = value.length > 0 ? value : new Uint8Array(1);
  return c.lsetxattr(cstr(path), cstr(name), v, value.length, 0) === 0;
}

const AT_FDCWD = -100;
const AT_SYMLINK_NOFOLLOW = 0x100;

/** Sets atime and mtime of `path` (never through a symlink) to `ns` since the epoch; float-second utimes where libc is missing. */
export function setTimes(path: string, ns: bigint): void {
  const c = libc();
  if (!c) {
    const s = Number(ns) / 1e9;
    lutimesSync(path, s, s);
    return;
  }
  const sec = ns >= 0n ? ns / 1_000_000_000n : -((-ns + 999_999_999n) / 1_000_000_000n);
  const nsec = ns - sec * 1_000_000_000n;
  const times = new BigInt64Array([sec, nsec, sec, nsec]);
  if (c.utimensat(AT_FDCWD, cstr(path), times, AT_SYMLINK_NOFOLLOW) !== 0) throw new Error(`utimensat ${path} failed`);
}
