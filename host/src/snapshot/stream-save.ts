// snapshotStreams: a snapshot of streams rather than of a directory: a
// running box's roots, each sent by its guest and read here as untrusted
// input. Two forms: snap.out's chunk records (the guest cut the files with
// the store's chunker and names, rather than sends, the chunks this box's
// have-map offered: ./have.ts), or, from a guest without it, a pax tar
// (tar.out) chunked here as it arrives. Every entry is checked like a tree
// read from the store (one safe name, a directory before what it holds, no
// name twice) and bounded (entries, bytes, chunk lengths); a sent chunk's id
// is computed here, a named one is only ever what the host's own map says
// (a guest that lies spoils only its own snapshot). Memory stays at a couple
// of chunks whatever the file sizes, and only chunks the store lacks are
// stored. Exact mtimes, owners and hard links (a link entry naming a file
// sent before it, stored as one link group with the same chunks) come with
// both forms; user.* xattrs with records only. Entries have ino and ctime 0:
// there is no fast path, but with records an unchanged file costs its
// digests, not its bytes.
import { IgnoreRules, Ignorer, type TarEntry, TarParser, type TarSink } from "@hutch/shared/wire";
import { check, firstError, RECORD, RecordReader, SnapEntry } from "@hutch/shared";
import { hex } from "./crypto.ts";
import { digestOf, type HaveMap } from "./have.ts";
import { StoreError, invalid } from "./errors.ts";
import { emptyStats } from "./objects.ts";
import { Meter } from "./progress.ts";
import { type SnapshotOptions, type SnapshotResult, commitSnapshot, findParent } from "./save.ts";
import { SaveRegistration } from "./saves.ts";
import type { SnapshotRecord, Store } from "./store.ts";
import { type TreeEntry, nameProblem } from "./tree.ts";
import { BlobWriter } from "./writer.ts";
import { type StreamLimits, StreamTree } from "./stream-tree.ts";

export type StreamRoot = {
  /** The directory it becomes at the snapshot's top ("workspace"). */
  name: string;
} & (
  | {
      /** A tar whose single top entry is the root directory. */
      tar: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
    }
  | {
      /** snap.out's records (shared/src/chunk/records.ts); the first entry is the root directory. */
      records: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
    }
);

/** What the box's records may name, and the key its digests are made with (./have.ts). */
export interface StreamHave {
  map: HaveMap;
  key: Uint8Array;
}

/** What crossed the channel: all bytes the box sent, and the chunks it sent or named instead. */
export interface Transfer {
  bytes: number;
  chunksSent: number;
  chunksNamed: number;
  /** Bytes of file content the named chunks stood for (not sent). */
  bytesNamed: number;
}

export const DEFAULT_STREAM_LIMITS: StreamLimits = { maxEntries: 2_000_000, maxBytes: 1024 ** 4 };
const MAX_META = 1024 * 1024;

type StreamOptions = SnapshotOptions & { limits?: StreamLimits; have?: StreamHave };

export async function snapshotStreams(
  store: Store,
  roots: StreamRoot[],
  opts: StreamOptions = {},
): Promise<SnapshotResult & { transfer: Transfer }> {
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
  opts: StreamOptions,
  t0: number,
): Promise<SnapshotResult & { transfer: Transfer }> {
  const limits = opts.limits ?? DEFAULT_STREAM_LIMITS;
  const source = opts.source ?? roots.map((r) => r.name).join(":");
  await store.syncIndex();
  await store.loadMarks();
  await opts.pause?.("index-loaded");
  const warnings: string[] = [];
  const parent = opts.parent === null ? undefined : await findParent(store, source, opts.parent);
  const stats = emptyStats();
  const meter = new Meter("snapshot", opts.progress);
  if (parent) {
    meter.filesTotal = parent.stats.files;
    meter.bytesTotal = parent.stats.bytes;
  }
  meter.phase = "save";
  const ignore =
    opts.exclude?.length || opts.never?.length
      ? new Ignorer([IgnoreRules.parse(opts.exclude ?? [])], IgnoreRules.parse(opts.never ?? []))
      : undefined;
  const received: Received = {
    store,
    opts,
    writer: new BlobWriter(store),
    meter,
    tree: new StreamTree(limits, stats, ignore),
    transfer: { bytes: 0, chunksSent: 0, chunksNamed: 0, bytesNamed: 0 },
    parentListing: parentLister(store, parent, warnings),
    skipping: false,
  };
  const { writer, tree, transfer } = received;
  try {
    for (const root of roots) {
      await readRoot(received, root, limits);
      if (!tree.has(root.name)) throw invalid(`the box sent an empty archive for ${root.name}`);
    }
    const root = { mode: 0o755, mtime: "0", uid: 0, gid: 0 };
    const top = await tree.store(writer);
    const made = await commitSnapshot(store, reg, writer, meter, opts, t0, { tree: top, source, parent, root, stats, skipped: [] });
    // Only a committed snapshot's chunks may be offered to the box again.
    opts.have?.map.save();
    return { ...made, stats, skipped: [], warnings, transfer };
  } catch (err) {
    await writer.discard();
    throw err;
  }
}

/** A listing of a directory of the parent snapshot: name → entry, or null; each read once, a failure noted in `warnings`. */
type ParentListing = (parts: string[]) => Promise<Map<string, TreeEntry> | null>;

/** The parent's listing of a directory, for counting changed files; read once per directory. */
function parentLister(store: Store, parent: SnapshotRecord | undefined, warnings: string[]): ParentListing {
  const listings = new Map<string, Map<string, TreeEntry> | null>();
  const parentListing: ParentListing = async (parts) => {
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
  return parentListing;
}

/** What a save of streams carries from root to root. */
interface Received {
  store: Store;
  opts: StreamOptions;
  writer: BlobWriter;
  meter: Meter;
  tree: StreamTree;
  transfer: Transfer;
  parentListing: ParentListing;
  /** The bytes that come next belong to an entry the rules left out. */
  skipping: boolean;
}

/**
 * The sink one root's entries go into: each placed in the tree, a file's
 * bytes cut with the store's chunker as they come from a tar (a couple of
 * chunks in memory at most), or taken as cut when they come as records
 * (`chunk`, `named`), and stored; a file is counted once its bytes add up.
 */
function rootSink(r: Received, root: StreamRoot) {
  const { opts, writer, meter, transfer } = r;
  const stats = r.tree.stats;
  const chunker = r.store.chunker;
  const max = chunker.params.maxSize;
  let file: { entry: TreeEntry; parts: string[]; ids: string[]; size: number } | undefined;
  let buf = new Uint8Array(0);
  let start = 0;
  let end = 0;
  const cutAll = async (final: boolean) => {
    while (start < end) {
      const cut = chunker.cut(buf, start, end, final);
      if (cut < 0) break;
      file!.ids.push(hex(await writer.put("data", buf.slice(start, cut))));
      transfer.chunksSent++;
      meter.bytes += cut - start;
      start = cut;
    }
  };
  const sink: TarSink = {
    begin: async (e: TarEntry) => {
      opts.signal?.throwIfAborted();
      const added = r.tree.add(e, root.name);
      if (added === "skip") r.skipping = true;
      else if (added) {
        file = { entry: added, parts: e.parts, ids: [], size: 0 };
        if (buf.length === 0) buf = new Uint8Array(2 * max);
        start = 0;
        end = 0;
      }
    },
    data: async (chunk: Uint8Array) => {
      if (r.skipping) return;
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
      r.skipping = false;
      if (!file) return;
      await cutAll(true);
      const f = file;
      file = undefined;
      f.entry.content = f.ids;
      if (f.size !== f.entry.size)
        throw invalid(`file ${JSON.stringify(f.parts.join("/"))} from the box has ${f.size} bytes, its header says ${f.entry.size}`);
      const prev = (await r.parentListing(f.parts.slice(0, -1)))?.get(f.entry.name);
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
  const chunk = async (bytes: Uint8Array, have: StreamHave) => {
    if (!file) return;
    const id = await writer.put("data", bytes);
    have.map.sent(digestOf(have.key, bytes), id, bytes.length);
    transfer.chunksSent++;
    file.ids.push(hex(id));
    file.size += bytes.length;
    meter.bytes += bytes.length;
  };
  const named = (id: Uint8Array, length: number) => {
    if (!file) return;
    transfer.chunksNamed++;
    transfer.bytesNamed += length;
    file.ids.push(hex(id));
    file.size += length;
    meter.bytes += length;
  };
  return { sink, chunk, named };
}

/** One root, read from its tar or its records into the tree. */
async function readRoot(r: Received, root: StreamRoot, limits: StreamLimits): Promise<void> {
  const { sink, chunk, named } = rootSink(r, root);
  const { opts, transfer } = r;
  if ("tar" in root) {
    const parser = new TarParser(sink, {
      topName: root.name,
      meta: true,
      maxBytes: limits.maxBytes,
      maxEntries: limits.maxEntries,
      maxMeta: MAX_META,
    });
    try {
      for await (const piece of root.tar) {
        transfer.bytes += piece.length;
        await parser.push(piece);
      }
      parser.finish();
    } catch (err) {
      if (err instanceof StoreError) throw err;
      throw invalid(`the box's archive of ${root.name} was refused: ${(err as Error).message}`, "see the daemon log", root.name);
    }
    return;
  }
  if (!opts.have) throw invalid("records from a box need its chunk map");
  const have = opts.have;
  await readRecords(root.name, root.records, sink, {
    have,
    minSize: r.store.chunker.params.minSize,
    maxSize: r.store.chunker.params.maxSize,
    transfer,
    chunk: (bytes) => chunk(bytes, have),
    named,
  });
}

interface RecordHandlers {
  have: StreamHave;
  minSize: number;
  maxSize: number;
  transfer: Transfer;
  /** A chunk the box sent, of the file begun last (nothing when the sink left that file out). */
  chunk(bytes: Uint8Array): Promise<void>;
  /** A chunk the box named, found in the map. */
  named(id: Uint8Array, length: number): void;
}

/**
 * Feeds one root's records to the same sink a tar feeds: an entry becomes a
 * begin (and a finish once a file's chunks add up to its size), a sent chunk
 * is stored, a named one is looked up in the host's own map. Chunk lengths
 * are checked against the store's sizes: none longer than the largest, none
 * shorter than the smallest but a file's last, none past the file's size.
 */
async function readRecords(
  rootName: string,
  records: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  sink: TarSink,
  h: RecordHandlers,
): Promise<void> {
  const reader = new RecordReader(h.maxSize);
  /** The file whose chunks are due, and how many bytes of them are still to come. */
  let due: { path: string; remaining: number } | undefined;
  let first = true;
  const refuse = (what: string, path?: string) =>
    invalid(`the box's records of ${rootName} were refused: ${what}`, "see the daemon log", path ?? rootName);
  const take = (length: number) => {
    if (!due) throw refuse("a chunk outside a file");
    if (length > due.remaining) throw refuse(`file ${JSON.stringify(due.path)} got more bytes than its size`, due.path);
    if (length < h.minSize && length !== due.remaining)
      throw refuse(`file ${JSON.stringify(due.path)} has a chunk shorter than the store's smallest before its end`, due.path);
    due.remaining -= length;
  };
  const endIfDone = async () => {
    if (due && due.remaining === 0) {
      due = undefined;
      await sink.finish();
    }
  };
  try {
    for await (const piece of records) {
      h.transfer.bytes += piece.length;
      for (const r of reader.push(piece)) {
        if (r.kind === RECORD.entry) {
          if (due) throw refuse(`file ${JSON.stringify(due.path)} ended ${due.remaining} bytes short`, due.path);
          if (!check(SnapEntry, r.entry)) throw refuse(`a malformed entry: ${firstError(SnapEntry, r.entry)}`);
          const e = r.entry;
          if (first !== (e.path.length === 0) || (first && e.type !== "dir"))
            throw refuse("the first entry is not the root directory, or the only one");
          first = false;
          const parts = [rootName, ...e.path];
          const path = parts.join("/");
          const kindOk =
            (e.type === "file") === (e.size !== undefined) &&
            (e.type === "symlink") === (e.target !== undefined) &&
            (e.type === "hardlink") === (e.linkOf !== undefined);
          if (!kindOk) throw refuse(`entry ${JSON.stringify(path)} has fields that do not fit its type`, path);
          const mtimeNs = BigInt(e.mtime);
          await sink.begin({
            parts,
            type: e.type,
            mode: e.mode,
            mtime: Number(mtimeNs / 1_000_000_000n),
            mtimeNs,
            uid: e.uid,
            gid: e.gid,
            size: e.size ?? 0,
            linkpath: e.target ?? "",
            ...(e.linkOf ? { link: [rootName, ...e.linkOf] } : {}),
            ...(e.xattrs ? { xattrs: e.xattrs } : {}),
          });
          if (e.type === "file" && e.size! > 0) due = { path, remaining: e.size! };
          else await sink.finish();
        } else if (r.kind === RECORD.data) {
          take(r.bytes.length);
          await h.chunk(r.bytes);
          await endIfDone();
        } else {
          const held = h.have.map.named(r.digest);
          if (!held) throw refuse("the box named a chunk it was not offered and did not send", due?.path);
          if (held.length !== r.length) throw refuse("the box named a chunk with the wrong length", due?.path);
          take(held.length);
          h.named(held.id, held.length);
          await endIfDone();
        }
      }
    }
    reader.finish();
  } catch (err) {
    if (err instanceof StoreError) throw err;
    throw refuse((err as Error).message);
  }
  if (due) throw refuse(`file ${JSON.stringify(due.path)} ended ${due.remaining} bytes short`, due.path);
  if (first) throw refuse("no entries");
}
