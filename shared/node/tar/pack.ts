// Streams a file, directory or symlink as a deterministic pax/ustar archive.
import { constants, type Stats } from "node:fs";
import { lstat, open, readdir, readlink } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { BLOCK, MAX_OCTAL_11, encodeHeader, paxRecord, utf8 } from "../../src/tar/header.ts";
import { TarError } from "../../src/tar/error.ts";
import { joinBytes } from "../../src/bytes.ts";
import { IGNORE_LIMITS, IgnoreRules, type Ignorer } from "../../src/ignore.ts";
import { XATTR_PAX_PREFIX } from "../../src/tar/parse.ts";

// Runtime-neutral base64 (btoa takes a binary string).
function base64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Upper bound for a yielded chunk, so a 1 GiB file costs 256 KiB of memory. */
export const CHUNK = 256 * 1024;
const NAME_FIELD = 100;
/** Hard-linked inodes remembered per archive (beyond it a link travels as another copy). */
const MAX_LINKS = 100_000;

// O_NOFOLLOW: the tree may change under us (it lives in a running box); if a file
// is swapped for a symlink after lstat we refuse it rather than read its target.
// O_NONBLOCK: a file swapped for a FIFO would otherwise block open() forever.
const READ_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/** Gathers small pieces (headers, small files) into chunks of at most CHUNK bytes. */
class Chunker {
  private parts: Uint8Array[] = [];
  private size = 0;

  get room(): number {
    return CHUNK - this.size;
  }

  *add(piece: Uint8Array): Generator<Uint8Array> {
    if (this.size > 0 && this.size + piece.length > CHUNK) yield this.take();
    this.parts.push(piece);
    this.size += piece.length;
    if (this.size >= CHUNK) yield this.take();
  }

  *flush(): Generator<Uint8Array> {
    if (this.size > 0) yield this.take();
  }

  private take(): Uint8Array {
    const [only, ...rest] = this.parts;
    let out: Uint8Array;
    if (only && rest.length === 0) {
      out = only;
    } else {
      out = new Uint8Array(this.size);
      let off = 0;
      for (const p of this.parts) {
        out.set(p, off);
        off += p.length;
      }
    }
    this.parts = [];
    this.size = 0;
    return out;
  }
}

interface Entry {
  /** Archive name without trailing slash. */
  name: string;
  typeflag: "0" | "1" | "2" | "5";
  mode: number;
  mtime: number;
  size: number;
  linkname?: string;
  /** Snapshot metadata (PackOptions.meta): exact mtime as "sec.nnnnnnnnn", and owners, as pax records. */
  exact?: { mtime: string; uid: number; gid: number; xattrs?: [string, Uint8Array][] };
}

/** The header blocks for one entry: a pax `x` header first when ustar fields overflow. */
function headerBlocks(e: Entry): Uint8Array[] {
  const name = utf8(e.typeflag === "5" ? `${e.name}/` : e.name);
  const link = e.linkname === undefined ? undefined : utf8(e.linkname);
  const records: Uint8Array[] = [];
  if (name.length > NAME_FIELD) records.push(paxRecord("path", e.name));
  if (link && link.length > NAME_FIELD) records.push(paxRecord("linkpath", e.linkname ?? ""));
  if (e.size > MAX_OCTAL_11) records.push(paxRecord("size", String(e.size)));
  if (e.exact) {
    records.push(paxRecord("mtime", e.exact.mtime));
    records.push(paxRecord("uid", String(e.exact.uid)));
    records.push(paxRecord("gid", String(e.exact.gid)));
    for (const [n, v] of e.exact.xattrs ?? []) records.push(paxRecord(`${XATTR_PAX_PREFIX}${n}`, base64(v)));
  }
  const mtime = Math.min(Math.max(0, Math.floor(e.mtime)), MAX_OCTAL_11);
  const main = encodeHeader({
    // Readers without pax support still get a usable (truncated) name.
    name: name.subarray(0, NAME_FIELD),
    linkname: link?.subarray(0, NAME_FIELD),
    // Snapshots keep setuid, setgid and sticky (a restore into a box drops them again); a copy never carries them.
    mode: e.mode & (e.exact ? 0o7777 : 0o777),
    size: e.size > MAX_OCTAL_11 ? 0 : e.size,
    mtime,
    typeflag: e.typeflag,
  });
  if (records.length === 0) return [main];
  const body = joinBytes(records);
  const pax = encodeHeader({ name: utf8("././@PaxHeader"), mode: 0o644, size: body.length, mtime, typeflag: "x" });
  return [pax, body, padding(body.length), main];
}

function padding(size: number): Uint8Array {
  return new Uint8Array((BLOCK - (size % BLOCK)) % BLOCK);
}

// Code-unit order, not localeCompare: the archive must not depend on the locale.
const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Packs `path` as an archive whose top entry is `basename(path)`. Symlinks are
 * stored, never followed. Sockets, FIFOs and devices are skipped silently, as
 * `docker cp` does: they cannot be meaningfully recreated in another box and
 * one stray socket should not fail a whole copy. `maxBytes` bounds file bytes.
 */
export interface PackOptions {
  maxBytes?: number;
  /** Leaves entries out: paths are relative to the top entry's inside ("src/a.ts"); an excluded directory is not entered. */
  ignore?: Ignorer;
  /** Rule files of this name found in a directory add to `ignore` for what is below it. */
  ignoreFile?: string;
  /**
   * For snapshots: exact mtimes and owners in pax records, and a file's
   * further hard links as link entries ('1') naming its first path here.
   */
  meta?: boolean;
  /** With `meta`: a path's extended attributes to carry (node:fs cannot read them; the caller's libc can), never following a link. */
  xattrs?: (path: string) => [string, Uint8Array][];
}

/** A nanosecond time as pax's decimal seconds, "sec.nnnnnnnnn" (negative before 1970). */
function exactTime(ns: bigint): string {
  const neg = ns < 0n;
  const a = neg ? -ns : ns;
  return `${neg ? "-" : ""}${a / 1_000_000_000n}.${String(a % 1_000_000_000n).padStart(9, "0")}`;
}

export async function* packTar(path: string, opts: PackOptions = {}): AsyncIterable<Uint8Array> {
  const root = resolve(path);
  const top = basename(root);
  if (top === "") throw new TarError(`cannot pack "${path}": it has no name to use as the top entry`);
  const maxBytes = opts.maxBytes ?? Number.POSITIVE_INFINITY;
  const out = new Chunker();
  let total = 0;
  // An explicit stack rather than recursion: depth is set by the tree, not by us.
  const stack: { abs: string; name: string }[] = [{ abs: root, name: top }];
  /** dev:ino → the archive name of a file's first link. */
  const links = new Map<string, string>();
  for (let next = stack.pop(); next; next = stack.pop()) {
    const { abs, name } = next;
    const st = await lstat(abs);
    const mtime = Math.floor(st.mtimeMs / 1000);
    let exact: Entry["exact"];
    if (opts.meta) {
      const big = await lstat(abs, { bigint: true });
      const x = opts.xattrs?.(abs) ?? [];
      exact = { mtime: exactTime(big.mtimeNs), uid: st.uid, gid: st.gid, ...(x.length > 0 ? { xattrs: x } : {}) };
    }
    const withExact = exact ? { exact } : {};
    if (st.isDirectory()) {
      for (const b of headerBlocks({ name, typeflag: "5", mode: st.mode, mtime, size: 0, ...withExact })) yield* out.add(b);
      const children = (await readdir(abs)).sort(byName);
      const rel = name === top ? "" : name.slice(top.length + 1);
      const ignore = opts.ignore;
      if (ignore && opts.ignoreFile && children.includes(opts.ignoreFile)) {
        const text = await readRuleFile(join(abs, opts.ignoreFile));
        if (text !== undefined) ignore.add(IgnoreRules.parse(text, rel));
      }
      for (let i = children.length - 1; i >= 0; i--) {
        const child = children[i] ?? "";
        if (ignore) {
          const childRel = rel === "" ? child : `${rel}/${child}`;
          const asFile = ignore.ignored(childRel, false);
          const asDir = ignore.ignored(childRel, true);
          // Only a rule for directories alone tells the two apart: stat just then.
          const isDir = asFile !== asDir && (await lstat(join(abs, child)).catch(() => undefined))?.isDirectory() === true;
          if (isDir ? asDir : asFile) continue;
        }
        stack.push({ abs: join(abs, child), name: `${name}/${child}` });
      }
    } else if (st.isSymbolicLink()) {
      const linkname = await readlink(abs);
      for (const b of headerBlocks({ name, typeflag: "2", mode: st.mode, mtime, size: 0, linkname, ...withExact })) yield* out.add(b);
    } else if (st.isFile()) {
      const key = opts.meta && st.nlink > 1 ? `${st.dev}:${st.ino}` : undefined;
      const first = key ? links.get(key) : undefined;
      if (first !== undefined) {
        for (const b of headerBlocks({ name, typeflag: "1", mode: st.mode, mtime, size: 0, linkname: first, ...withExact }))
          yield* out.add(b);
        continue;
      }
      if (key && links.size < MAX_LINKS) links.set(key, name);
      total += st.size;
      if (total > maxBytes) throw new TarError(`entry "${name}": archive exceeds maxBytes (${maxBytes} bytes)`);
      yield* fileBlocks(abs, name, st, out, exact);
    }
  }
  // End of archive: two zero blocks.
  yield* out.add(new Uint8Array(2 * BLOCK));
  yield* out.flush();
}

/** A rule file's text: a regular file (never through a link), at most IGNORE_LIMITS.fileBytes of it, or undefined. */
export async function readRuleFile(path: string): Promise<string | undefined> {
  try {
    const fh = await open(path, READ_FLAGS);
    try {
      if (!(await fh.stat()).isFile()) return undefined;
      const buf = new Uint8Array(IGNORE_LIMITS.fileBytes);
      const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
      return new TextDecoder().decode(buf.subarray(0, bytesRead));
    } finally {
      await fh.close();
    }
  } catch {
    return undefined;
  }
}

async function* fileBlocks(abs: string, name: string, st: Stats, out: Chunker, exact?: Entry["exact"]): AsyncGenerator<Uint8Array> {
  const fh = await open(abs, READ_FLAGS);
  try {
    const fst = await fh.stat();
    if (!fst.isFile() || fst.ino !== st.ino) {
      throw new TarError(`entry "${name}": file was replaced while packing`);
    }
    const size = st.size;
    for (const b of headerBlocks({
      name,
      typeflag: "0",
      mode: st.mode,
      mtime: Math.floor(st.mtimeMs / 1000),
      size,
      ...(exact ? { exact } : {}),
    })) {
      yield* out.add(b);
    }
    let pos = 0;
    while (pos < size) {
      const buf = new Uint8Array(Math.min(out.room, size - pos));
      let filled = 0;
      while (filled < buf.length) {
        const { bytesRead } = await fh.read(buf, filled, buf.length - filled, pos + filled);
        // The header already promised `size` bytes; padding with zeros (as GNU
        // tar does) would deliver a silently corrupt copy, so fail loudly instead.
        if (bytesRead === 0) throw new TarError(`entry "${name}": file shrank while being packed`);
        filled += bytesRead;
      }
      pos += filled;
      yield* out.add(buf);
    }
    yield* out.add(padding(size));
  } finally {
    await fh.close();
  }
}
