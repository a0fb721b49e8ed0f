// snapshotStreams: a snapshot of archives rather than of a directory: a
// running box's roots, each packed by its guest as a pax tar (tar.out) and
// read here as untrusted input. Every entry is checked like a tree read from
// the store (one safe name, a directory before what it holds, no name twice)
// and bounded (entries, bytes); file bytes are chunked as they arrive, so
// memory stays at a couple of chunks whatever the file sizes, and only chunks
// the store lacks are stored. With tar.out's `meta` the archive carries exact
// mtimes, owners and hard links (a link entry naming a file sent before it,
// stored as one link group with the same chunks); it carries no xattrs, and
// entries have ino and ctime 0 (no fast path: every byte crosses).
import { IgnoreRules, Ignorer, type TarEntry, TarParser, type TarSink } from "@hutch/shared/wire";
import { newId } from "@hutch/shared";
import { hex } from "./crypto.ts";
import { StoreError, invalid } from "./errors.ts";
import { emptyStats, type SnapshotBody } from "./objects.ts";
import { Meter } from "./progress.ts";
import { type SnapshotOptions, type SnapshotResult, findParent } from "./save.ts";
import { SaveRegistration } from "./saves.ts";
import type { Store } from "./store.ts";
import { TREE_LIMITS, type TreeEntry, compareNames, encodeTree, nameProblem } from "./tree.ts";
import { BlobWriter } from "./writer.ts";

export interface StreamRoot {
  /** The directory it becomes at the snapshot's top ("workspace"). */
  name: string;
  /** A tar whose single top entry is the root directory. */
  tar: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
}

export interface StreamLimits {
  /** Entries in all archives together. */
  maxEntries: number;
  /** File bytes in all archives together. */
  maxBytes: number;
}

export const DEFAULT_STREAM_LIMITS: StreamLimits = { maxEntries: 2_000_000, maxBytes: 1024 ** 4 };
const MAX_META = 1024 * 1024;

interface Dir {
  entry: TreeEntry;
  children: Map<string, TreeEntry>;
  depth: number;
}

export async function snapshotStreams(
  store: Store,
  roots: StreamRoot[],
  opts: SnapshotOptions & { limits?: StreamLimits } = {},
): Promise<SnapshotResult> {
  const t0 = performance.now();
  for (const r of roots) {
    const bad = nameProblem(r.name);
    if (bad) throw invalid(`a root may not have ${bad}`);
  }
  const reg = await SaveRegistration.begin(store);
  try {
    return await saveStreams(store, reg, roots, opts, t0);
  } finally {
    await reg.end();
  }
}

async function saveStreams(
  store: Store,
  reg: SaveRegistration,
  roots: StreamRoot[],
  opts: SnapshotOptions & { limits?: StreamLimits },
  t0: number,
): Promise<SnapshotResult> {
  const started = reg.started;
  const limits = opts.limits ?? DEFAULT_STREAM_LIMITS;
  const source = opts.source ?? roots.map((r) => r.name).join(":");
  await store.syncIndex();
  await store.loadMarks();
  await opts.pause?.("index-loaded");
  const warnings: string[] = [];
  const parent = opts.parent === null ? undefined : await findParent(store, source, opts.parent);

  // The parent's listing of a directory, for counting changed files; read once per directory.
  const listings = new Map<string, Map<string, TreeEntry> | null>();
  const parentListing = async (parts: string[]): Promise<Map<string, TreeEntry> | null> => {
    const key = parts.join("/");
    if (listings.has(key)) return listings.get(key)!;
    let out: Map<string, TreeEntry> | null = null;
    try {
      if (!parent) out = null;
      else if (parts.length === 0) out = new Map((await store.readTree(parent.tree, `snapshot ${parent.id}`)).map((e) => [e.name, e]));
      else {
        const up = await parentListing(parts.slice(0, -1));
        const e = up?.get(parts.at(-1)!);
        out = e?.type === "dir" ? new Map((await store.readTree(e.tree!, key)).map((c) => [c.name, c])) : null;
      }
    } catch (err) {
      warnings.push(`parent's ${key || "."} not compared: ${(err as Error).message}`);
    }
    listings.set(key, out);
    return out;
  };

  const stats = emptyStats();
  const meter = new Meter("snapshot", opts.progress);
  if (parent) {
    meter.filesTotal = parent.stats.files;
    meter.bytesTotal = parent.stats.bytes;
  }
  meter.phase = "save";
  const writer = new BlobWriter(store);
  const chunker = store.chunker;
  const max = chunker.params.maxSize;
  const dirs = new Map<string, Dir>();
  const top: TreeEntry[] = [];
  let entries = 0;
  let bytes = 0;
  // What the rules leave out, checked here too: a guest that does not apply them still sends nothing that is stored.
  const ignore =
    opts.exclude?.length || opts.never?.length
      ? new Ignorer([IgnoreRules.parse(opts.exclude ?? [])], IgnoreRules.parse(opts.never ?? []))
      : undefined;
  const leftOut = new Set<string>();
  /** A file sent with further hard links → every entry of its group. */
  const linkGroups = new Map<TreeEntry, TreeEntry[]>();
  let skipping = false;

  try {
    for (const root of roots) {
      let file: { entry: TreeEntry; parts: string[]; ids: string[]; size: number } | undefined;
      let buf = new Uint8Array(0);
      let start = 0;
      let end = 0;
      const cutAll = async (final: boolean) => {
        while (start < end) {
          const cut = chunker.cut(buf, start, end, final);
          if (cut < 0) break;
          file!.ids.push(hex(await writer.put("data", buf.slice(start, cut))));
          meter.bytes += cut - start;
          start = cut;
        }
      };
      const sink: TarSink = {
        begin: async (e: TarEntry) => {
          opts.signal?.throwIfAborted();
          if (++entries > limits.maxEntries)
            throw invalid(`the box's archives hold more than ${limits.maxEntries} entries`, "exclude some of it, or raise the limit");
          const path = e.parts.join("/");
          for (const p of e.parts) {
            const bad = nameProblem(p);
            if (bad) throw invalid(`entry ${JSON.stringify(path)} from the box has ${bad}`, undefined, path);
          }
          const parentPath = e.parts.slice(0, -1).join("/");
          const name = e.parts.at(-1)!;
          if (e.parts.length > 1 && (leftOut.has(parentPath) || ignore?.ignored(path, e.type === "dir"))) {
            if (e.type === "dir") leftOut.add(path);
            else if (e.type !== "symlink") skipping = true;
            return;
          }
          const home = e.parts.length === 1 ? undefined : dirs.get(parentPath);
          if (e.parts.length === 1 ? e.type !== "dir" || name !== root.name : !home) {
            throw invalid(`entry ${JSON.stringify(path)} from the box does not lie in a directory sent before it`, undefined, path);
          }
          if (home?.children.has(name)) throw invalid(`entry ${JSON.stringify(path)} from the box is sent twice`, undefined, path);
          const mtime = String(e.mtimeNs ?? BigInt(e.mtime) * 1_000_000_000n);
          const base = { name, mode: e.mode & 0o7777, mtime, uid: e.uid ?? 0, gid: e.gid ?? 0 };
          let entry: TreeEntry;
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
            const group = linkGroups.get(first) ?? [first];
            group.push(entry);
            linkGroups.set(first, group);
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
            bytes += e.size;
            if (bytes > limits.maxBytes)
              throw invalid(`the box's archives hold more than ${limits.maxBytes} bytes`, "exclude some of it, or raise the limit");
            file = { entry, parts: e.parts, ids: [], size: 0 };
            if (buf.length === 0) buf = new Uint8Array(2 * max);
            start = 0;
            end = 0;
          }
          if (home) {
            if (home.children.size >= TREE_LIMITS.entries)
              throw invalid(`directory ${JSON.stringify(parentPath)} from the box has too many entries`);
            home.children.set(name, entry);
          } else top.push(entry);
        },
        data: async (chunk: Uint8Array) => {
          if (skipping) return;
          let off = 0;
          while (off < chunk.length) {
            if (end === buf.length) {
              buf.copyWithin(0, start, end);
              end -= start;
              start = 0;
            }
            const n = Math.min(chunk.length - off, buf.length - end);
            buf.set(chunk.subarray(off, off + n), end);
            end += n;
            off += n;
            file!.size += n;
            if (end - start >= max) await cutAll(false);
          }
        },
        finish: async () => {
          skipping = false;
          if (!file) return;
          await cutAll(true);
          const f = file;
          file = undefined;
          f.entry.content = f.ids;
          if (f.size !== f.entry.size)
            throw invalid(`file ${JSON.stringify(f.parts.join("/"))} from the box has ${f.size} bytes, its header says ${f.entry.size}`);
          const prev = (await parentListing(f.parts.slice(0, -1)))?.get(f.entry.name);
          if (!(prev?.type === "file" && prev.content!.length === f.ids.length && prev.content!.every((id, i) => id === f.ids[i])))
            stats.filesChanged++;
          stats.files++;
          stats.filesRead++;
          stats.bytes += f.size;
          stats.bytesRead += f.size;
          meter.files++;
          meter.bytesNew = writer.stats.bytesStored;
          meter.tick();
        },
      };
      const parser = new TarParser(sink, {
        topName: root.name,
        meta: true,
        maxBytes: limits.maxBytes,
        maxEntries: limits.maxEntries,
        maxMeta: MAX_META,
      });
      try {
        for await (const piece of root.tar) await parser.push(piece);
        parser.finish();
      } catch (err) {
        if (err instanceof StoreError) throw err;
        throw invalid(`the box's archive of ${root.name} was refused: ${(err as Error).message}`, "see the daemon log", root.name);
      }
      if (!top.some((e) => e.name === root.name)) throw invalid(`the box sent an empty archive for ${root.name}`);
    }

    // Link groups get their count and a number of their own, as a walk of the disk gives them.
    let group = 0;
    for (const members of linkGroups.values()) {
      group++;
      for (const m of members) Object.assign(m, { nlink: members.length, dev: "0", ino: String(group) });
    }
    // Trees, deepest first, so each directory's id is known before its parent's tree is encoded.
    for (const d of [...dirs.values()].sort((a, b) => b.depth - a.depth)) {
      const list = [...d.children.values()].sort((a, b) => compareNames(a.name, b.name));
      d.entry.tree = hex(await writer.put("tree", encodeTree(list)));
    }
    const tree = hex(await writer.put("tree", encodeTree([...top].sort((a, b) => compareNames(a.name, b.name)))));
    await opts.pause?.("tree-stored");
    await writer.flush();
    await opts.pause?.("before-commit");
    Object.assign(stats, writer.stats);
    stats.ms = Math.round(performance.now() - t0);
    const body: SnapshotBody = {
      v: 1,
      id: newId("snap", started),
      time: started,
      source,
      host: store.host,
      tree,
      root: { mode: 0o755, mtime: "0", uid: 0, gid: 0 },
      ...(parent ? { parent: parent.id } : {}),
      ...(opts.label !== undefined ? { label: opts.label } : {}),
      tags: opts.tags ?? [],
      stats,
      skipped: [],
    };
    const name = await reg.commit(body, opts.pause);
    meter.bytesNew = stats.bytesStored;
    meter.finish();
    return { id: body.id, name, stats, skipped: [], warnings };
  } catch (err) {
    await writer.discard();
    throw err;
  }
}
