// snapshotTree: walk a directory, store what changed, write a snapshot.
//
// A file whose path, size, mtime, ctime and inode match the parent snapshot's
// entry (restic's rule) is not read: its chunk list is reused, once the index
// confirms every chunk is still there and not marked by a prune. Unchanged
// directories come out as the same tree blob, so a no-change snapshot stores
// nothing but the snapshot object.
//
// Ordering, which prune's safety rests on (saves.ts, prune.ts): the save is
// registered before the marks are loaded; every blob is in an uploaded,
// indexed pack before the snapshot object is written; the registration goes
// only after that write; and a save that ran longer than the store's grace
// period less a tenth, judged after the write, takes its snapshot back.
import { constants, closeSync, fstatSync, lstatSync, openSync, readSync, readdirSync, readlinkSync, type BigIntStats } from "node:fs";
import { join, resolve } from "node:path";
import { IGNORE_LIMITS, IgnoreRules, Ignorer, newId } from "@hutch/shared/store";
import { fromHex, hex } from "./crypto.ts";
import { invalid } from "./errors.ts";
import { readXattrs } from "./fsx.ts";
import { emptyStats, type SnapshotBody, type SnapshotStats } from "./objects.ts";
import { Meter, type ProgressFn } from "./progress.ts";
import { type CommitPoint, SaveRegistration } from "./saves.ts";
import type { SnapshotRecord, Store } from "./store.ts";
import { TREE_LIMITS, type TreeEntry, compareNames, encodeTree, nameProblem } from "./tree.ts";
import { turn } from "./turns.ts";
import { BlobWriter } from "./writer.ts";

/** Points where a save awaits `pause` (a test seam for forcing interleavings with prune). */
export type SavePoint = "index-loaded" | "tree-stored" | "before-commit" | CommitPoint;

export interface SnapshotOptions {
  /** What is being snapshotted (a box name, a path); default the root's absolute path. Parents are found among snapshots of the same source. */
  source?: string;
  /** The parent snapshot's id; default the newest of the same source; null for none (every file is read). */
  parent?: string | null;
  tags?: string[];
  /** A line of text for the timeline ("before the refactor"). */
  label?: string;
  /** Read extended attributes (default true). */
  xattrs?: boolean;
  /** Rules (shared/src/ignore.ts) for what to leave out, relative to the snapshot's top ("workspace/node_modules/", "*.log"). */
  exclude?: string[];
  /** Rules like `exclude` that nothing (no negation, no rule file) can override: what holds a box's stubs. */
  never?: string[];
  /** Rule files of this name in the tree add their own rules for what is below them (".hutchignore"); read on a walk of a directory, by the guest for a stream. */
  ignoreFile?: string;
  progress?: ProgressFn;
  signal?: AbortSignal;
  pause?: (point: SavePoint) => Promise<void>;
}

export interface SnapshotResult {
  id: string;
  /** The snapshot object's name in the store. */
  name: string;
  stats: SnapshotStats;
  skipped: { path: string; reason: string }[];
  /** Why the parent was not used, when one was found but could not be read. */
  warnings: string[];
}

/**
 * A file is read into one buffer of this size, or of the store's largest
 * chunk if that is larger (a cut needs that many bytes in view). The default
 * largest chunk, 4 MiB: a first save of the bench tree peaked ~5 MB lower
 * than with 8 MiB, in the same time.
 */
const READ_BLOCK = 4 * 1024 * 1024;
const MAX_SKIPPED_LISTED = 1000;
/** Hard-linked inodes remembered per save, so a link group is read once. */
const MAX_LINKS_REMEMBERED = 10_000;
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

interface Ctx {
  store: Store;
  writer: BlobWriter;
  meter: Meter;
  stats: SnapshotStats;
  skipped: { path: string; reason: string }[];
  links: Map<string, { size: number; mtime: string; content: string[] }>;
  xattrs: boolean;
  signal?: AbortSignal;
  warnings: string[];
  /** The read buffer: a file under its size is read whole into it, a larger one a block at a time (the writer holds no reference past put()). */
  buf: Uint8Array | undefined;
  ignore: Ignorer;
  ignoreFile?: string;
}

function errText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.code}: ${e.message}` : String(err);
}

function skip(ctx: Ctx, path: string, reason: string): void {
  ctx.stats.skipped++;
  if (ctx.skipped.length < MAX_SKIPPED_LISTED) ctx.skipped.push({ path, reason });
}

function xattrsOf(ctx: Ctx, path: string): [string, string][] | undefined {
  if (!ctx.xattrs) return undefined;
  const list = readXattrs(path);
  if (list.length === 0) return undefined;
  return list.slice(0, TREE_LIMITS.xattrs).map(([n, v]) => [n, Buffer.from(v.buffer, v.byteOffset, v.length).toString("base64")]);
}

/** One directory of a snapshot with several roots: it appears at the snapshot's top under `name`. */
export interface SnapshotRoot {
  name: string;
  path: string;
}

function statDir(path: string): BigIntStats {
  let st: BigIntStats;
  try {
    st = lstatSync(path, { bigint: true });
  } catch (err) {
    throw invalid(`cannot snapshot ${path}: ${errText(err)}`, "give an existing directory");
  }
  if (!st.isDirectory()) throw invalid(`cannot snapshot ${path}: not a directory`, "give a directory");
  return st;
}

/**
 * Snapshots one directory (its entries are the snapshot's top), or several
 * (each a directory named by the caller at the top, as `workspace` and
 * `home` are for a box).
 */
export async function snapshotTree(store: Store, root: string | SnapshotRoot[], opts: SnapshotOptions = {}): Promise<SnapshotResult> {
  const t0 = performance.now();
  const roots = typeof root === "string" ? undefined : root.map((r) => ({ name: r.name, path: resolve(r.path) }));
  for (const r of roots ?? []) {
    const bad = nameProblem(r.name);
    if (bad) throw invalid(`a root may not have ${bad}`);
  }
  if (roots && new Set(roots.map((r) => r.name)).size !== roots.length) throw invalid("two roots have the same name");
  const absRoot = typeof root === "string" ? resolve(root) : "";
  // Several roots: the top is a directory the store makes up, owned by whoever saves, dated 0.
  const rootSt = roots ? undefined : statDir(absRoot);
  const rootStats = roots ? roots.map((r) => ({ ...r, st: statDir(r.path) })) : [];
  const source = opts.source ?? (roots ? roots.map((r) => r.path).join(":") : absRoot);
  const reg = await SaveRegistration.begin(store);
  try {
    return await saveRegistered(store, reg, { roots, rootStats, absRoot, rootSt, source }, opts, t0);
  } finally {
    await reg.end();
  }
}

interface What {
  roots: SnapshotRoot[] | undefined;
  rootStats: (SnapshotRoot & { st: BigIntStats })[];
  absRoot: string;
  rootSt: BigIntStats | undefined;
  source: string;
}

async function saveRegistered(
  store: Store,
  reg: SaveRegistration,
  { roots, rootStats, absRoot, rootSt, source }: What,
  opts: SnapshotOptions,
  t0: number,
): Promise<SnapshotResult> {
  await store.syncIndex();
  await store.loadMarks();
  await opts.pause?.("index-loaded");

  const warnings: string[] = [];
  const parent = opts.parent === null ? undefined : await findParent(store, source, opts.parent);
  let parentRoot: TreeEntry[] | undefined;
  if (parent) {
    try {
      parentRoot = await store.readTree(parent.tree, `snapshot ${parent.id}`);
    } catch (err) {
      warnings.push(`parent ${parent.id} not used: ${(err as Error).message}`);
    }
  }

  const stats = emptyStats();
  const meter = new Meter("snapshot", opts.progress);
  const ctx: Ctx = {
    store,
    writer: new BlobWriter(store),
    meter,
    stats,
    skipped: [],
    links: new Map(),
    xattrs: opts.xattrs ?? true,
    signal: opts.signal,
    warnings,
    buf: undefined,
    ignore: new Ignorer([IgnoreRules.parse(opts.exclude ?? [])], IgnoreRules.parse(opts.never ?? [])),
    ...(opts.ignoreFile ? { ignoreFile: opts.ignoreFile } : {}),
  };
  if (meter.enabled) {
    if (parent && parentRoot) {
      meter.filesTotal = parent.stats.files;
      meter.bytesTotal = parent.stats.bytes;
    } else {
      meter.phase = "scan";
      meter.filesTotal = 0;
      meter.bytesTotal = 0;
      for (const dir of roots ? roots.map((r) => r.path) : [absRoot]) {
        const t = await scan(dir, opts.signal);
        meter.filesTotal += t.files;
        meter.bytesTotal += t.bytes;
      }
    }
  }
  meter.phase = "save";
  try {
    const tree = roots ? await saveRoots(ctx, rootStats, parentRoot) : await saveDir(ctx, absRoot, "", parentRoot);
    const rootXattrs = rootSt ? xattrsOf(ctx, absRoot) : undefined;
    const top = rootSt
      ? { mode: Number(rootSt.mode & 0o7777n), mtime: String(rootSt.mtimeNs), uid: Number(rootSt.uid), gid: Number(rootSt.gid) }
      : { mode: 0o755, mtime: "0", uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
    const root = { ...top, ...(rootXattrs ? { xattrs: rootXattrs } : {}) };
    const made = await commitSnapshot(store, reg, ctx.writer, meter, opts, t0, { tree, source, parent, root, stats, skipped: ctx.skipped });
    return { ...made, stats, skipped: ctx.skipped, warnings };
  } catch (err) {
    await ctx.writer.discard();
    throw err;
  }
}

/** What a save made, ready to be named: its tree and the parts of the snapshot object a walk and a stream fill differently. */
export interface Made {
  tree: string;
  source: string;
  parent: SnapshotRecord | undefined;
  root: SnapshotBody["root"];
  stats: SnapshotStats;
  skipped: SnapshotBody["skipped"];
}

/**
 * A save's last steps, however its tree was made (a walk here, a box's
 * streams in stream-save.ts): every blob flushed into indexed packs, then
 * the snapshot object written under the save's registration (the header
 * says why in that order), then the meter closed.
 */
export async function commitSnapshot(
  store: Store,
  reg: SaveRegistration,
  writer: BlobWriter,
  meter: Meter,
  opts: SnapshotOptions,
  t0: number,
  { tree, source, parent, root, stats, skipped }: Made,
): Promise<{ id: string; name: string }> {
  await opts.pause?.("tree-stored");
  await writer.flush();
  await opts.pause?.("before-commit");
  Object.assign(stats, writer.stats);
  stats.ms = Math.round(performance.now() - t0);
  const body: SnapshotBody = {
    v: 1,
    id: newId("snap", reg.started),
    time: reg.started,
    source,
    host: store.host,
    tree,
    root,
    ...(parent ? { parent: parent.id } : {}),
    ...(opts.label !== undefined ? { label: opts.label } : {}),
    tags: opts.tags ?? [],
    stats,
    skipped,
  };
  const name = await reg.commit(body, opts.pause);
  meter.bytesNew = stats.bytesStored;
  meter.finish();
  return { id: body.id, name };
}

export async function findParent(store: Store, source: string, ref: string | undefined): Promise<SnapshotRecord | undefined> {
  if (ref !== undefined) return store.getSnapshot(ref);
  const all = await store.listSnapshots();
  for (let i = all.length - 1; i >= 0; i--) if (all[i]!.source === source) return all[i];
  return undefined;
}

/** Counts files and bytes for the progress ETA when there is no parent to estimate from. */
async function scan(dir: string, signal?: AbortSignal): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  const walk = async (d: string) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const n of names) {
      signal?.throwIfAborted();
      await turn();
      try {
        const st = lstatSync(join(d, n));
        if (st.isDirectory()) await walk(join(d, n));
        else if (st.isFile()) {
          files++;
          bytes += st.size;
        }
      } catch {
        // Vanished: the save itself reports what it cannot read.
      }
    }
  };
  await walk(dir);
  return { files, bytes };
}

/** The made-up top of a snapshot of several roots: one directory entry for each. */
async function saveRoots(ctx: Ctx, roots: (SnapshotRoot & { st: BigIntStats })[], parent: TreeEntry[] | undefined): Promise<string> {
  const entries: TreeEntry[] = [];
  for (const r of [...roots].sort((a, b) => compareNames(a.name, b.name))) {
    const prev = parent?.find((e) => e.name === r.name);
    let sub: TreeEntry[] | undefined;
    if (prev?.type === "dir" && prev.tree) {
      try {
        sub = await ctx.store.readTree(prev.tree, r.name);
      } catch (err) {
        ctx.warnings.push(`parent's ${r.name} not used: ${(err as Error).message}`);
      }
    }
    const st = r.st;
    const entry: TreeEntry = {
      name: r.name,
      type: "dir",
      mode: Number(st.mode & 0o7777n),
      mtime: String(st.mtimeNs),
      uid: Number(st.uid),
      gid: Number(st.gid),
      tree: await saveDir(ctx, r.path, r.name, sub),
    };
    const x = xattrsOf(ctx, r.path);
    if (x) entry.xattrs = x;
    ctx.stats.dirs++;
    entries.push(entry);
  }
  return hex(await ctx.writer.put("tree", encodeTree(entries)));
}

async function saveDir(ctx: Ctx, abs: string, rel: string, parent: TreeEntry[] | undefined): Promise<string> {
  let names: string[];
  try {
    names = readdirSync(abs);
  } catch (err) {
    if (rel === "") throw invalid(`cannot read ${abs}: ${errText(err)}`);
    skip(ctx, rel, `cannot list: ${errText(err)}`);
    names = [];
  }
  names.sort(compareNames);
  if (ctx.ignoreFile && names.includes(ctx.ignoreFile)) {
    const text = readRuleFile(join(abs, ctx.ignoreFile));
    if (text !== undefined && !ctx.ignore.add(IgnoreRules.parse(text, rel)))
      ctx.warnings.push(`${rel || "."}/${ctx.ignoreFile} not read: more than ${IGNORE_LIMITS.files} rule files`);
  }
  const previous = parent ? new Map(parent.map((e) => [e.name, e])) : undefined;
  const entries: TreeEntry[] = [];
  for (const name of names) {
    ctx.signal?.throwIfAborted();
    await turn();
    const path = join(abs, name);
    const relPath = rel === "" ? name : `${rel}/${name}`;
    const bad = nameProblem(name);
    if (bad) {
      skip(ctx, relPath, `not stored: ${bad}`);
      continue;
    }
    let st: BigIntStats;
    try {
      st = lstatSync(path, { bigint: true });
    } catch (err) {
      skip(ctx, relPath, `cannot stat: ${errText(err)}`);
      continue;
    }
    if (ctx.ignore.ignored(relPath, st.isDirectory())) continue;
    const base = { name, mode: Number(st.mode & 0o7777n), mtime: String(st.mtimeNs), uid: Number(st.uid), gid: Number(st.gid) };
    const prev = previous?.get(name);
    let entry: TreeEntry | undefined;
    if (st.isDirectory()) {
      let sub: TreeEntry[] | undefined;
      if (prev?.type === "dir" && prev.tree) {
        try {
          sub = await ctx.store.readTree(prev.tree, relPath);
        } catch (err) {
          ctx.warnings.push(`parent's ${relPath} not used: ${(err as Error).message}`);
        }
      }
      entry = { ...base, type: "dir", tree: await saveDir(ctx, path, relPath, sub) };
      ctx.stats.dirs++;
    } else if (st.isSymbolicLink()) {
      let target: string;
      try {
        target = readlinkSync(path);
      } catch (err) {
        skip(ctx, relPath, `cannot read link: ${errText(err)}`);
        continue;
      }
      if (target === "" || target.includes("\uFFFD") || Buffer.byteLength(target) > TREE_LIMITS.targetBytes) {
        skip(ctx, relPath, "not stored: a symlink target that is empty, too long or not valid UTF-8");
        continue;
      }
      entry = { ...base, type: "symlink", target };
      ctx.stats.symlinks++;
    } else if (st.isFile()) {
      entry = await saveFile(ctx, path, relPath, st, base, prev);
    } else {
      skip(ctx, relPath, `not stored: a ${kindOf(st)}`);
    }
    if (!entry) continue;
    const x = xattrsOf(ctx, path);
    if (x) entry.xattrs = x;
    entries.push(entry);
  }
  const bytes = encodeTree(entries);
  if (bytes.length > TREE_LIMITS.bytes) throw invalid(`directory ${rel || "."} has too many entries to store (${entries.length})`);
  return hex(await ctx.writer.put("tree", bytes));
}

/** A rule file's text: a regular file (never through a link), at most IGNORE_LIMITS.fileBytes of it, or undefined. */
function readRuleFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const buf = new Uint8Array(IGNORE_LIMITS.fileBytes);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return new TextDecoder().decode(buf.subarray(0, n));
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function kindOf(st: BigIntStats): string {
  if (st.isFIFO()) return "fifo";
  if (st.isSocket()) return "socket";
  if (st.isCharacterDevice()) return "character device";
  if (st.isBlockDevice()) return "block device";
  return "special file";
}

function sameChunks(a: string[], b: string[]): boolean {
  return a === b || (a.length === b.length && a.every((id, i) => id === b[i]));
}

type Base = Pick<TreeEntry, "name" | "mode" | "mtime" | "uid" | "gid">;

async function saveFile(
  ctx: Ctx,
  path: string,
  rel: string,
  st: BigIntStats,
  base: Base,
  prev: TreeEntry | undefined,
): Promise<TreeEntry | undefined> {
  const size = Number(st.size);
  const ino = String(st.ino);
  const ctime = String(st.ctimeNs);
  const linkKey = st.nlink > 1n ? `${st.dev}:${st.ino}` : undefined;
  let content: string[] | undefined;
  let stored = size;
  if (
    prev?.type === "file" &&
    prev.size === size &&
    prev.mtime === base.mtime &&
    prev.ctime === ctime &&
    prev.ino === ino &&
    prev.content?.every((id) => ctx.writer.has("data", fromHex(id)))
  ) {
    content = prev.content;
  }
  const linked = linkKey ? ctx.links.get(linkKey) : undefined;
  if (!content && linked && linked.size === size && linked.mtime === base.mtime) content = linked.content;
  if (!content) {
    const read = await readFile(ctx, path, rel, st);
    if (!read) return undefined;
    content = read.ids;
    stored = read.size;
    ctx.stats.filesRead++;
    ctx.stats.bytesRead += read.size;
  } else {
    ctx.meter.bytes += size;
  }
  if (linkKey && !linked && ctx.links.size < MAX_LINKS_REMEMBERED) ctx.links.set(linkKey, { size: stored, mtime: base.mtime, content });
  if (!(prev?.type === "file" && sameChunks(prev.content!, content))) ctx.stats.filesChanged++;
  ctx.stats.files++;
  ctx.stats.bytes += stored;
  ctx.meter.files++;
  ctx.meter.bytesNew = ctx.writer.stats.bytesStored;
  ctx.meter.tick();
  const entry: TreeEntry = { ...base, type: "file", size: stored, content, ino, ctime };
  if (linkKey) {
    entry.nlink = Number(st.nlink);
    entry.dev = String(st.dev);
  }
  return entry;
}

/** Chunks and stores one file; undefined (and skipped) when it cannot be read as the file that was stat'ed. */
async function readFile(ctx: Ctx, path: string, rel: string, st: BigIntStats): Promise<{ ids: string[]; size: number } | undefined> {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch (err) {
    skip(ctx, rel, `cannot open: ${errText(err)}`);
    return undefined;
  }
  try {
    const f = fstatSync(fd, { bigint: true });
    if (!f.isFile() || f.ino !== st.ino || f.dev !== st.dev) {
      skip(ctx, rel, "replaced while being read");
      return undefined;
    }
    const chunker = ctx.store.chunker;
    ctx.buf ??= new Uint8Array(Math.max(READ_BLOCK, chunker.params.maxSize));
    const buf = ctx.buf;
    let start = 0;
    let end = 0;
    let eof = false;
    const ids: string[] = [];
    let total = 0;
    for (;;) {
      while (!eof && end < buf.length) {
        let n: number;
        try {
          n = readSync(fd, buf, end, buf.length - end, null);
        } catch (err) {
          skip(ctx, rel, `cannot read: ${errText(err)}`);
          return undefined;
        }
        if (n === 0) eof = true;
        else end += n;
      }
      while (start < end) {
        const cut = chunker.cut(buf, start, end, eof);
        if (cut < 0) break;
        ids.push(hex(await ctx.writer.put("data", buf.subarray(start, cut))));
        ctx.meter.bytes += cut - start;
        total += cut - start;
        start = cut;
        ctx.meter.tick();
        await turn();
      }
      if (eof) break;
      buf.copyWithin(0, start, end);
      end -= start;
      start = 0;
    }
    return { ids, size: total };
  } finally {
    closeSync(fd);
  }
}
