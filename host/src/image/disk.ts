// ext4 disk images made from a directory with mke2fs -d (no loop mount, no
// root needed; as root, ownership and setuid bits are copied as they are).
import { closeSync, openSync, ftruncateSync } from "node:fs";
import { TOOLS, run } from "./tools.ts";

export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

export const roundUp = (n: number, to: number): number => Math.ceil(n / to) * to;

/** Bytes a tree occupies on disk (du's allocated size, which is what it costs inside ext4 too). */
export async function treeBytes(dir: string): Promise<number> {
  const out = await run([TOOLS.du.bin, "-s", "--block-size=1", dir]);
  return Number(out.split(/\s/)[0]);
}

export interface Ext4Options {
  label: string;
  bytes: number;
  /** A read-only disk needs no journal. */
  journal: boolean;
  /** mke2fs picks 1 KiB blocks for small images; DAX mounts need the page size. */
  blockSize?: 1024 | 2048 | 4096;
  /** Inodes to make (mke2fs -N); its default ratio runs out on trees of many small files. */
  inodes?: number;
}

/**
 * Writes `file` as a sparse ext4 image of `dir`. Inode tables and the journal
 * are zeroed now (lazy_*_init=0) so a booted box does not spend its first
 * minutes of tcg CPU zeroing them, and its overlay does not grow by doing so.
 */
export async function makeExt4(dir: string, file: string, opts: Ext4Options): Promise<void> {
  const fd = openSync(file, "w");
  try {
    ftruncateSync(fd, opts.bytes);
  } finally {
    closeSync(fd);
  }
  await run([
    TOOLS.mke2fs.bin,
    "-q",
    "-F",
    "-t",
    "ext4",
    "-d",
    dir,
    "-L",
    opts.label,
    "-m",
    "0",
    "-E",
    "lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0",
    ...(opts.journal ? [] : ["-O", "^has_journal"]),
    ...(opts.blockSize ? ["-b", String(opts.blockSize)] : []),
    ...(opts.inodes ? ["-N", String(opts.inodes)] : []),
    file,
  ]);
}

/** Converts a raw image to qcow2; runs of zeros stay unallocated. */
export async function toQcow2(raw: string, qcow2: string): Promise<void> {
  await run([TOOLS.qemuImg.bin, "convert", "-f", "raw", "-O", "qcow2", raw, qcow2]);
}

/** Virtual size of a qcow2 image, from qemu-img info. */
export async function virtualBytes(qcow2: string): Promise<number> {
  const info = JSON.parse(await run([TOOLS.qemuImg.bin, "info", "--output=json", qcow2])) as { "virtual-size": number };
  return info["virtual-size"];
}
