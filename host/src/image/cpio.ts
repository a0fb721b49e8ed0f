// The "newc" cpio format the kernel unpacks an initramfs from
// (Documentation/driver-api/early-userspace/buffer-format.rst). Written here
// rather than with cpio(1) so device nodes (/dev/console) need no root and the
// archive is byte-for-byte reproducible.

export type CpioEntry =
  | { type: "dir"; name: string; mode: number }
  | { type: "file"; name: string; mode: number; data: Uint8Array }
  | { type: "symlink"; name: string; target: string }
  | { type: "char"; name: string; mode: number; major: number; minor: number };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;

const encoder = new TextEncoder();
const hex8 = (n: number): string => n.toString(16).padStart(8, "0");
const pad4 = (n: number): number => (4 - (n % 4)) % 4;

function header(ino: number, mode: number, nlink: number, size: number, rdev: [number, number], nameBytes: number): string {
  // magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor, namesize, check
  return `070701${[ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1], nameBytes, 0].map(hex8).join("")}`;
}

function record(ino: number, name: string, mode: number, nlink: number, data: Uint8Array, rdev: [number, number] = [0, 0]): Uint8Array[] {
  const nameZ = encoder.encode(`${name}\0`);
  const head = encoder.encode(header(ino, mode, nlink, data.length, rdev, nameZ.length));
  return [head, nameZ, new Uint8Array(pad4(head.length + nameZ.length)), data, new Uint8Array(pad4(data.length))];
}

/** Owner root, mtime 0; parents must come before their children, as the kernel creates entries in order. */
export function writeCpio(entries: readonly CpioEntry[]): Uint8Array {
  const parts: Uint8Array[] = [];
  entries.forEach((e, i) => {
    const ino = i + 1;
    const name = e.name.replace(/^\/+/, "");
    switch (e.type) {
      case "dir":
        parts.push(...record(ino, name, S_IFDIR | (e.mode & 0o7777), 2, new Uint8Array()));
        break;
      case "file":
        parts.push(...record(ino, name, S_IFREG | (e.mode & 0o7777), 1, e.data));
        break;
      case "symlink":
        parts.push(...record(ino, name, S_IFLNK | 0o777, 1, encoder.encode(e.target)));
        break;
      case "char":
        parts.push(...record(ino, name, S_IFCHR | (e.mode & 0o7777), 1, new Uint8Array(), [e.major, e.minor]));
        break;
    }
  });
  parts.push(...record(0, "TRAILER!!!", 0, 1, new Uint8Array()));
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
