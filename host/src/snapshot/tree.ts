// Trees: one directory's entries, stored as a tree blob (JSON, zstd, sealed)
// and named by its keyed id, so an unchanged directory is the same blob in
// every snapshot and a diff skips it by id. Read as untrusted, like the tar
// unpacker reads an archive: bounded, every name a single safe component,
// sorted and unique, every field typed, nothing unknown.
import { isHexId } from "./crypto.ts";
import { corrupt } from "./errors.ts";

export type EntryType = "file" | "dir" | "symlink";

export interface TreeEntry {
  name: string;
  type: EntryType;
  /** Permission bits with setuid, setgid and sticky (0..0o7777). */
  mode: number;
  /** Nanoseconds since the epoch, as a decimal string (exact beyond 2^53). */
  mtime: string;
  uid: number;
  gid: number;
  /** file: bytes. */
  size?: number;
  /** file: chunk ids in order (hex). */
  content?: string[];
  /** file: inode and ctime, compared with the parent's for the unchanged-file fast path. */
  ino?: string;
  ctime?: string;
  /** file with more than one link: the link count and device, so restore can link the group again. */
  nlink?: number;
  dev?: string;
  /** dir: the tree id (hex). */
  tree?: string;
  /** symlink: its target, stored and restored, never followed. */
  target?: string;
  /** Extended attributes, [name, base64 value], sorted by name. */
  xattrs?: [string, string][];
}

export const TREE_LIMITS = {
  /** A tree blob's plaintext; ~250k entries of a typical size. */
  bytes: 64 * 1024 * 1024,
  entries: 1_000_000,
  nameBytes: 255,
  targetBytes: 4095,
  chunksPerFile: 16 * 1024 * 1024,
  xattrs: 256,
  xattrNameBytes: 255,
  xattrValueBytes: 64 * 1024,
} as const;

const enc = new TextEncoder();
const DECIMAL = /^-?[0-9]{1,20}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A name as the store keeps it: one path component. Shared by save (what it reads) and restore (what it writes). */
export function nameProblem(name: unknown): string | null {
  if (typeof name !== "string" || name === "") return "an empty name";
  if (name === "." || name === "..") return `the name ${JSON.stringify(name)}`;
  if (name.includes("/")) return `a name with "/" (${JSON.stringify(name)})`;
  if (name.includes("\0")) return "a name with NUL";
  if (name.includes("\uFFFD") || enc.encode(name).length > TREE_LIMITS.nameBytes)
    return `a name that is not valid UTF-8 of at most ${TREE_LIMITS.nameBytes} bytes`;
  return null;
}

export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Deterministic bytes for a directory's entries (sorted by the caller), so equal directories get equal ids. */
export function encodeTree(entries: TreeEntry[]): Uint8Array {
  const rows = entries.map((e) => {
    const o: Record<string, unknown> = { name: e.name, type: e.type, mode: e.mode, mtime: e.mtime, uid: e.uid, gid: e.gid };
    if (e.type === "file") {
      o.size = e.size;
      o.content = e.content;
      o.ino = e.ino;
      o.ctime = e.ctime;
      if (e.nlink !== undefined) {
        o.nlink = e.nlink;
        o.dev = e.dev;
      }
    } else if (e.type === "dir") o.tree = e.tree;
    else o.target = e.target;
    if (e.xattrs && e.xattrs.length > 0) o.xattrs = e.xattrs;
    return o;
  });
  return enc.encode(JSON.stringify({ v: 1, entries: rows }));
}

const KEYS: Record<EntryType, Set<string>> = {
  file: new Set(["name", "type", "mode", "mtime", "uid", "gid", "size", "content", "ino", "ctime", "nlink", "dev", "xattrs"]),
  dir: new Set(["name", "type", "mode", "mtime", "uid", "gid", "tree", "xattrs"]),
  symlink: new Set(["name", "type", "mode", "mtime", "uid", "gid", "target", "xattrs"]),
};

function isU32(n: unknown): n is number {
  return Number.isInteger(n) && (n as number) >= 0 && (n as number) <= 0xffffffff;
}

/** Why an entry is not one this store could have written, or null. */
function entryProblem(e: Record<string, unknown>): string | null {
  const named = nameProblem(e.name);
  if (named) return `has ${named}`;
  const type = e.type;
  if (type !== "file" && type !== "dir" && type !== "symlink") return `has an unknown type ${JSON.stringify(type)}`;
  for (const k of Object.keys(e)) if (!KEYS[type].has(k)) return `has an unknown field ${JSON.stringify(k)}`;
  if (!Number.isInteger(e.mode) || (e.mode as number) < 0 || (e.mode as number) > 0o7777) return "has a bad mode";
  if (typeof e.mtime !== "string" || !DECIMAL.test(e.mtime)) return "has a bad mtime";
  if (!isU32(e.uid) || !isU32(e.gid)) return "has a bad owner";
  if (type === "file") {
    if (!Number.isSafeInteger(e.size) || (e.size as number) < 0) return "has a bad size";
    const c = e.content;
    if (!Array.isArray(c) || c.length > TREE_LIMITS.chunksPerFile || !c.every((id) => typeof id === "string" && isHexId(id)))
      return "has a bad chunk list";
    if ((e.size as number) > 0 !== c.length > 0) return "has a chunk list that does not fit its size";
    if (typeof e.ino !== "string" || !DECIMAL.test(e.ino) || typeof e.ctime !== "string" || !DECIMAL.test(e.ctime))
      return "has a bad inode or ctime";
    if (e.nlink !== undefined && (!isU32(e.nlink) || (e.nlink as number) < 2 || typeof e.dev !== "string" || !DECIMAL.test(e.dev)))
      return "has a bad link count";
    if (e.nlink === undefined && e.dev !== undefined) return "has a device without a link count";
  } else if (type === "dir") {
    if (typeof e.tree !== "string" || !isHexId(e.tree)) return "has a bad tree id";
  } else {
    const t = e.target;
    if (typeof t !== "string" || t === "" || t.includes("\0") || enc.encode(t).length > TREE_LIMITS.targetBytes)
      return "has a bad symlink target";
  }
  if (e.xattrs !== undefined) return xattrsProblem(e.xattrs);
  return null;
}

/** Why an xattr list is not one a tree may hold (non-empty, bounded, sorted unique names, base64 values), or null. */
export function xattrsProblem(x: unknown): string | null {
  if (!Array.isArray(x) || x.length === 0 || x.length > TREE_LIMITS.xattrs) return "has a bad xattr list";
  let prev = "";
  for (const pair of x) {
    if (!Array.isArray(pair) || pair.length !== 2) return "has a bad xattr";
    const [n, v] = pair as unknown[];
    if (typeof n !== "string" || n === "" || n.includes("\0") || enc.encode(n).length > TREE_LIMITS.xattrNameBytes || n <= prev)
      return "has a bad or unsorted xattr name";
    if (typeof v !== "string" || !BASE64.test(v) || (v.length * 3) / 4 > TREE_LIMITS.xattrValueBytes + 2) return "has a bad xattr value";
    prev = n;
  }
  return null;
}

/** Parses and checks a tree blob's plaintext; `object` names it in errors. */
export function decodeTree(object: string, bytes: Uint8Array): TreeEntry[] {
  if (bytes.length > TREE_LIMITS.bytes) throw corrupt(object, "is larger than any tree can be");
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw corrupt(object, "is not valid JSON");
  }
  const d = doc as { v?: unknown; entries?: unknown };
  if (
    typeof doc !== "object" ||
    doc === null ||
    Array.isArray(doc) ||
    d.v !== 1 ||
    !Array.isArray(d.entries) ||
    Object.keys(doc).length !== 2
  ) {
    throw corrupt(object, "is not a version 1 tree");
  }
  if (d.entries.length > TREE_LIMITS.entries) throw corrupt(object, "has too many entries");
  let prev: string | undefined;
  for (let i = 0; i < d.entries.length; i++) {
    const e = d.entries[i] as Record<string, unknown>;
    if (typeof e !== "object" || e === null || Array.isArray(e)) throw corrupt(object, `entry ${i} is not an object`);
    const problem = entryProblem(e);
    if (problem) throw corrupt(object, `entry ${i} ${problem}`);
    const name = e.name as string;
    if (prev !== undefined && compareNames(prev, name) >= 0)
      throw corrupt(object, `entry ${i} (${JSON.stringify(name)}) is out of order or repeated`);
    prev = name;
  }
  return d.entries as TreeEntry[];
}
