// The tree a box's streams build (stream-save.ts), one entry at a time: each
// checked as a tree read from the store is (one safe name, a directory before
// what it holds, no name twice, bounded counts and bytes), left out when the
// rules say so, and placed; at the end the link groups are numbered and the
// trees stored, deepest first.
import type { Ignorer, TarEntry } from "@hutch/shared/wire";
import { hex } from "./crypto.ts";
import { invalid } from "./errors.ts";
import type { SnapshotStats } from "./objects.ts";
import { TREE_LIMITS, type TreeEntry, compareNames, encodeTree, nameProblem, xattrsProblem } from "./tree.ts";
import type { BlobWriter } from "./writer.ts";

export interface StreamLimits {
  /** Entries in all archives together. */
  maxEntries: number;
  /** File bytes in all archives together. */
  maxBytes: number;
}

interface Dir {
  entry: TreeEntry;
  children: Map<string, TreeEntry>;
  depth: number;
}

/** Only user.* attributes are kept from a box: the others speak for its kernel (capabilities, labels). */
const BOX_XATTR = /^user\./;

export class StreamTree {
  private readonly dirs = new Map<string, Dir>();
  private readonly top: TreeEntry[] = [];
  private readonly leftOut = new Set<string>();
  /** A file sent with further hard links → every entry of its group. */
  private readonly linkGroups = new Map<TreeEntry, TreeEntry[]>();
  private entries = 0;
  private bytes = 0;

  constructor(
    private readonly limits: StreamLimits,
    readonly stats: SnapshotStats,
    /** What the rules leave out, checked here too: a guest that does not apply them still sends nothing that is stored. */
    private readonly ignore: Ignorer | undefined,
  ) {}

  /** Places an entry; returns the file entry whose bytes come next, "skip" when the bytes that come next are left out, or nothing. */
  add(e: TarEntry, rootName: string): TreeEntry | "skip" | undefined {
    const { limits, stats, dirs } = this;
    if (++this.entries > limits.maxEntries)
      throw invalid(`the box's archives hold more than ${limits.maxEntries} entries`, "exclude some of it, or raise the limit");
    const path = e.parts.join("/");
    for (const p of e.parts) {
      const bad = nameProblem(p);
      if (bad) throw invalid(`entry ${JSON.stringify(path)} from the box has ${bad}`, undefined, path);
    }
    const parentPath = e.parts.slice(0, -1).join("/");
    const name = e.parts.at(-1)!;
    if (e.parts.length > 1 && (this.leftOut.has(parentPath) || this.ignore?.ignored(path, e.type === "dir"))) {
      if (e.type === "dir") this.leftOut.add(path);
      else if (e.type !== "symlink") return "skip";
      return undefined;
    }
    const home = e.parts.length === 1 ? undefined : dirs.get(parentPath);
    if (e.parts.length === 1 ? e.type !== "dir" || name !== rootName : !home) {
      throw invalid(`entry ${JSON.stringify(path)} from the box does not lie in a directory sent before it`, undefined, path);
    }
    if (home?.children.has(name)) throw invalid(`entry ${JSON.stringify(path)} from the box is sent twice`, undefined, path);
    const mtime = String(e.mtimeNs ?? BigInt(e.mtime) * 1_000_000_000n);
    const xattrs = e.xattrs?.filter(([n]) => BOX_XATTR.test(n));
    const xBad = xattrs?.length ? xattrsProblem(xattrs) : null;
    if (xBad) throw invalid(`entry ${JSON.stringify(path)} from the box ${xBad}`, undefined, path);
    const base = { name, mode: e.mode & 0o7777, mtime, uid: e.uid ?? 0, gid: e.gid ?? 0, ...(xattrs?.length ? { xattrs } : {}) };
    let entry: TreeEntry;
    let file: TreeEntry | undefined;
    if (e.type === "hardlink") {
      // Another name for a file this archive sent before: the same chunks, one link group.
      const target = e.link!.join("/");
      const first = dirs.get(e.link!.slice(0, -1).join("/"))?.children.get(e.link!.at(-1)!);
      if (first?.type !== "file" || e.link!.length < 2)
        throw invalid(
          `hard link ${JSON.stringify(path)} from the box names ${JSON.stringify(target)}, not a file sent before it`,
          undefined,
          path,
        );
      entry = { ...base, type: "file", size: first.size!, content: first.content!, ino: "0", ctime: "0" };
      const group = this.linkGroups.get(first) ?? [first];
      group.push(entry);
      this.linkGroups.set(first, group);
      stats.files++;
      stats.bytes += first.size!;
    } else if (e.type === "dir") {
      entry = { ...base, type: "dir", tree: "" };
      if (e.parts.length > 1 && e.parts.length - 1 > 4096) throw invalid(`entry ${JSON.stringify(path)} is nested too deep`);
      dirs.set(path, { entry, children: new Map(), depth: e.parts.length });
      stats.dirs++;
    } else if (e.type === "symlink") {
      if (e.linkpath === "" || e.linkpath.includes("\0") || Buffer.byteLength(e.linkpath) > TREE_LIMITS.targetBytes)
        throw invalid(`symlink ${JSON.stringify(path)} from the box has a bad target`, undefined, path);
      entry = { ...base, type: "symlink", target: e.linkpath };
      stats.symlinks++;
    } else {
      entry = { ...base, type: "file", size: e.size, content: [], ino: "0", ctime: "0" };
      this.bytes += e.size;
      if (this.bytes > limits.maxBytes)
        throw invalid(`the box's archives hold more than ${limits.maxBytes} bytes`, "exclude some of it, or raise the limit");
      file = entry;
    }
    if (home) {
      if (home.children.size >= TREE_LIMITS.entries)
        throw invalid(`directory ${JSON.stringify(parentPath)} from the box has too many entries`);
      home.children.set(name, entry);
    } else this.top.push(entry);
    return file;
  }

  /** Whether a root's directory arrived (an archive with no entry at all leaves none). */
  has(rootName: string): boolean {
    return this.top.some((e) => e.name === rootName);
  }

  /** Numbers the link groups, stores every tree, and returns the top tree's id. */
  async store(writer: BlobWriter): Promise<string> {
    // Link groups get their count and a number of their own, as a walk of the disk gives them.
    let group = 0;
    for (const members of this.linkGroups.values()) {
      group++;
      for (const m of members) Object.assign(m, { nlink: members.length, dev: "0", ino: String(group) });
    }
    // Trees, deepest first, so each directory's id is known before its parent's tree is encoded.
    for (const d of [...this.dirs.values()].sort((a, b) => b.depth - a.depth)) {
      const list = [...d.children.values()].sort((a, b) => compareNames(a.name, b.name));
      d.entry.tree = hex(await writer.put("tree", encodeTree(list)));
    }
    return hex(await writer.put("tree", encodeTree([...this.top].sort((a, b) => compareNames(a.name, b.name)))));
  }
}
