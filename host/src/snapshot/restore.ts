// restoreTree: a snapshot (or some paths of it) into a directory, in two
// passes. The first reads and checks every tree it will need (names, symlink
// targets, hard-link groups) and counts; nothing is written unless it all
// holds. The second writes into a staging directory beside or inside the
// destination and moves the result in only when everything checked out, so a
// damaged pack or a refused entry leaves nothing but a staging directory that
// is removed. Files are created O_EXCL|O_NOFOLLOW in directories the restore
// made itself, links are created and never followed.
import {
  closeSync,
  fchmodSync,
  fchownSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  rmdirSync,
  symlinkSync,
  writeSync,
  chmodSync,
  chownSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fromHex } from "./crypto.ts";
import { StoreError, corrupt, invalid } from "./errors.ts";
import { setFdTimes, setTimes, writeXattr } from "./fsx.ts";
import type { Located } from "./index-cache.ts";
import { snapshotPath, resolvePath } from "./paths.ts";
import { MemoryGuard } from "./memory.ts";
import { Meter, type ProgressFn } from "./progress.ts";
import type { SnapshotRecord, Store } from "./store.ts";
import type { TreeEntry } from "./tree.ts";
import { CREATE_FLAGS, type WriteJob, writeJob } from "./restore-files.ts";
import { turn } from "./turns.ts";
import { WriteThread } from "./write-thread.ts";

export const STAGING_PREFIX = ".hutch-restore-";
/**
 * Small files a restore creates on its own thread before it starts a file
 * writer (write-thread.ts): a restore of a few files never pays for one.
 */
const WRITER_AFTER_FILES = 1000;
const NO_BYTES = new Uint8Array(0);
/**
 * A full collection after this many bytes of dropped plaintext (memory.ts).
 * The bench's restore (scripts/bench/snapshot.ts) peaked at 122-129 MiB
 * collecting every 32 MiB, 95-98 MiB every 8 MiB, in the same user time
 * (1.5-1.6 s).
 */
const GC_EVERY = 8 * 1024 * 1024;
/**
 * Plaintext read ahead of the write position (two windows of this, their
 * stored and decrypted bytes, are in memory). 2 MiB against 4 MiB: peak RSS
 * 86 against 95-98 MiB, no difference in time (a window still takes at least
 * one chunk, up to the 4 MiB maximum).
 */
const WINDOW_BYTES = 2 * 1024 * 1024;

export interface RestoreOptions {
  /** Paths inside the snapshot to restore (with their parent directories); default everything. */
  paths?: string[];
  /**
   * "inside" (default): refuse a snapshot holding a symlink whose target leaves
   * the restored tree (absolute, or `..` past its root), because what comes out
   * of a box is untrusted. "any": restore every link as stored.
   */
  symlinks?: "inside" | "any";
  /** Permission bits kept (default 0o7777, everything as stored; 0o777 drops setuid, setgid and sticky). */
  modeMask?: number;
  /** Give entries their stored owner (needs root); default: owned by whoever restores. */
  owner?: boolean;
  /** Restore extended attributes (default true), or those whose name passes; a filesystem or namespace that refuses one is skipped. */
  xattrs?: boolean | ((name: string) => boolean);
  progress?: ProgressFn;
  signal?: AbortSignal;
}

export interface RestoreResult {
  snapshot: string;
  files: number;
  dirs: number;
  symlinks: number;
  hardlinks: number;
  bytes: number;
  /** Extended attributes the destination refused. */
  xattrsSkipped: number;
  ms: number;
}

/** Which parts of the tree a restore covers: a trie of the requested paths. */
interface Selection {
  all: boolean;
  children: Map<string, Selection>;
}

function select(paths: string[] | undefined): Selection {
  const root: Selection = { all: paths === undefined, children: new Map() };
  for (const p of paths ?? []) {
    let node = root;
    for (const part of snapshotPath(p)) {
      if (node.all) break;
      let next = node.children.get(part);
      if (!next) {
        next = { all: false, children: new Map() };
        node.children.set(part, next);
      }
      node = next;
    }
    node.all = true;
    node.children.clear();
  }
  return root;
}

/** Where a symlink at `dirParts` pointing at `target` lands, lexically; null if outside the tree. */
export function linkInside(dirParts: string[], target: string): boolean {
  if (target.startsWith("/")) return false;
  const at = [...dirParts];
  for (const part of target.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (at.length === 0) return false;
      at.pop();
    } else at.push(part);
  }
  return true;
}

interface Plan {
  files: number;
  bytes: number;
}

interface Ctx {
  store: Store;
  snap: SnapshotRecord;
  opts: RestoreOptions;
  meter: Meter;
  result: RestoreResult;
  /** Hard-link groups: dev:ino → the first restored path (written by then: files are written one at a time). */
  links: Map<string, string>;
  /** The process's umask when the restore began: a file whose mode it leaves whole is created with that mode. */
  umask: number;
  /** Directories to give their metadata once their children are in, deepest last. */
  dirs: { path: string; entry: Pick<TreeEntry, "mode" | "mtime" | "uid" | "gid" | "xattrs"> }[];
  memory: MemoryGuard;
  /** The file writer, once started; undefined, or not ready, while files are created here. */
  writer?: WriteThread;
  smallFiles: number;
}

export async function restoreTree(store: Store, snapshotRef: string, dest: string, opts: RestoreOptions = {}): Promise<RestoreResult> {
  const t0 = performance.now();
  const snap = await store.getSnapshot(snapshotRef);
  const selection = select(opts.paths);
  await store.syncIndex();
  const target = resolve(dest);

  // Pass 1: every requested path exists and goes through directories only; every tree checks out.
  for (const p of opts.paths ?? []) await resolvePath(store, snap, snapshotPath(p));
  const plan: Plan = { files: 0, bytes: 0 };
  await planDir(store, snap, snap.tree, [], selection, opts, plan, `snapshot ${snap.id}`);

  // Pass 2: write into a private staging directory.
  let destExists = false;
  try {
    const st = lstatSync(target);
    if (!st.isDirectory()) throw invalid(`${target} exists and is not a directory`, "restore into a new or empty directory");
    if (readdirSync(target).length > 0) throw invalid(`${target} is not empty`, "restore into a new or empty directory");
    destExists = true;
  } catch (err) {
    if (err instanceof StoreError) throw err;
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const staging = mkdtempSync(
    join(destExists ? target : dirname(target), destExists ? STAGING_PREFIX : `${STAGING_PREFIX}${basename(target)}-`),
  );
  chmodSync(staging, 0o700);
  const meter = new Meter("restore", opts.progress);
  meter.filesTotal = plan.files;
  meter.bytesTotal = plan.bytes;
  meter.phase = "restore";
  const result: RestoreResult = { snapshot: snap.id, files: 0, dirs: 0, symlinks: 0, hardlinks: 0, bytes: 0, xattrsSkipped: 0, ms: 0 };
  const ctx: Ctx = {
    store,
    snap,
    opts,
    meter,
    result,
    links: new Map(),
    dirs: [],
    memory: new MemoryGuard(GC_EVERY),
    umask: process.umask(),
    smallFiles: 0,
  };
  try {
    await writeDir(ctx, snap.tree, staging, [], selection, `snapshot ${snap.id}`);
    // Every file is in before any directory gets its metadata.
    await ctx.writer?.flush();
    // Deepest first, so setting a directory's mtime is the last change to it.
    for (let i = ctx.dirs.length - 1; i >= 0; i--) applyMeta(ctx, ctx.dirs[i]!.path, ctx.dirs[i]!.entry, "dir");
    if (destExists) {
      for (const name of readdirSync(staging)) renameSync(join(staging, name), join(target, name));
      rmdirSync(staging);
    } else {
      renameSync(staging, target);
      applyMeta(ctx, target, snap.root, "dir");
    }
  } catch (err) {
    // The writer stops before the staging directory goes, so nothing is created in it while it is removed.
    await ctx.writer?.discard();
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
  result.ms = Math.round(performance.now() - t0);
  meter.finish();
  return result;
}

async function planDir(
  store: Store,
  snap: SnapshotRecord,
  treeId: string,
  parts: string[],
  sel: Selection,
  opts: RestoreOptions,
  plan: Plan,
  needed: string,
): Promise<void> {
  opts.signal?.throwIfAborted();
  const entries = await store.readTree(treeId, needed, false);
  for (const e of entries) {
    await turn();
    const child = sel.all ? sel : sel.children.get(e.name);
    if (!child) continue;
    const here = [...parts, e.name];
    const rel = here.join("/");
    if (e.type === "dir") await planDir(store, snap, e.tree!, here, child, opts, plan, rel);
    else if (!child.all) throw invalid(`${rel} in snapshot ${snap.id} is not a directory`);
    else if (e.type === "symlink") {
      if ((opts.symlinks ?? "inside") === "inside" && !linkInside(parts, e.target!)) {
        throw invalid(
          `snapshot ${snap.id}: symlink ${rel} -> ${e.target} points outside the restored tree; nothing was restored`,
          "restore it anyway with symlinks: 'any' (the link is created, never followed), or leave it out with paths",
          rel,
        );
      }
    } else {
      plan.files++;
      plan.bytes += e.size!;
    }
  }
}

/**
 * The one-chunk files of a directory, read a run at a time: a save stores a
 * directory's small files one after another in a pack, so neighbours come
 * back with one ranged get of up to WINDOW_BYTES instead of one each.
 */
class SmallReads {
  private readonly ready = new Map<string, Promise<Uint8Array>>();
  private readonly order: { name: string; loc: Located }[] = [];
  private at = 0;

  constructor(
    private readonly ctx: Ctx,
    entries: TreeEntry[],
    sel: Selection,
    parts: string[],
  ) {
    const files = entries.filter(
      (e) => e.type === "file" && e.content!.length === 1 && e.nlink === undefined && (sel.all || sel.children.get(e.name)?.all),
    );
    const locs = ctx.store.locateAll(
      "data",
      files.map((e) => fromHex(e.content![0]!)),
      (i) => `tree entry ${[...parts, files[i]!.name].join("/")}`,
    );
    for (let i = 0; i < files.length; i++) this.order.push({ name: files[i]!.name, loc: locs[i]! });
  }

  /** The plaintext of a one-chunk file of this directory (undefined for one not planned here). */
  take(name: string): Promise<Uint8Array> | undefined {
    if (!this.ready.has(name)) this.fill(name);
    const p = this.ready.get(name);
    this.ready.delete(name);
    return p;
  }

  private fill(name: string): void {
    while (this.at < this.order.length && this.order[this.at]!.name !== name) this.at++;
    if (this.at >= this.order.length) return;
    const run: { name: string; loc: Located }[] = [this.order[this.at++]!];
    let bytes = run[0]!.loc.length;
    while (this.at < this.order.length) {
      const prev = run[run.length - 1]!.loc;
      const l = this.order[this.at]!.loc;
      if (l.pack !== prev.pack || l.offset !== prev.offset + prev.length || bytes + l.length > WINDOW_BYTES) break;
      run.push(this.order[this.at++]!);
      bytes += l.length;
    }
    const all = readGroup(
      this.ctx.store,
      run.map((r) => r.loc),
    );
    run.forEach((r, i) => {
      const plain = all.then((plains) => plains[i]!);
      // A read that fails is reported by the file that takes it; one nobody takes (the restore stopped) must not crash the process.
      plain.catch(() => undefined);
      this.ready.set(r.name, plain);
    });
  }
}

async function writeDir(ctx: Ctx, treeId: string, abs: string, parts: string[], sel: Selection, needed: string): Promise<void> {
  ctx.opts.signal?.throwIfAborted();
  const entries = await ctx.store.readTree(treeId, needed, false);
  const small = new SmallReads(ctx, entries, sel, parts);
  for (const e of entries) {
    await turn();
    const child = sel.all ? sel : sel.children.get(e.name);
    if (!child) continue;
    const path = join(abs, e.name);
    const rel = [...parts, e.name].join("/");
    if (e.type === "dir") {
      mkdirSync(path, 0o700);
      ctx.result.dirs++;
      await writeDir(ctx, e.tree!, path, [...parts, e.name], child, rel);
      ctx.dirs.push({ path, entry: e });
    } else if (e.type === "symlink") {
      symlinkSync(e.target!, path);
      if (ctx.opts.owner) lchownSync(path, e.uid, e.gid);
      setTimes(path, BigInt(e.mtime));
      ctx.result.symlinks++;
    } else await writeFile(ctx, e, path, rel, small);
  }
}

function applyMeta(ctx: Ctx, path: string, e: Pick<TreeEntry, "mode" | "mtime" | "uid" | "gid" | "xattrs">, kind: "dir" | "file"): void {
  writeXattrs(ctx, path, e.xattrs);
  if (ctx.opts.owner) chownSync(path, e.uid, e.gid);
  if (kind === "dir") chmodSync(path, e.mode & (ctx.opts.modeMask ?? 0o7777));
  setTimes(path, BigInt(e.mtime));
}

function writeXattrs(ctx: Ctx, path: string, xattrs: [string, string][] | undefined): void {
  const keep = ctx.opts.xattrs;
  if (!xattrs || keep === false) return;
  for (const [name, value] of xattrs) {
    if (typeof keep === "function" && !keep(name)) continue;
    if (!writeXattr(path, name, Buffer.from(value, "base64"))) ctx.result.xattrsSkipped++;
  }
}

async function writeFile(ctx: Ctx, e: TreeEntry, path: string, rel: string, small: SmallReads): Promise<void> {
  const linkKey = e.nlink !== undefined ? `${e.dev}:${e.ino}` : undefined;
  const first = linkKey ? ctx.links.get(linkKey) : undefined;
  if (first) {
    // Queued behind the file it links to, wherever that is being written.
    await place(ctx, { kind: "link", from: first, path }, NO_BYTES);
    ctx.result.hardlinks++;
    return;
  }
  if (e.content!.length <= 1) {
    // One chunk at most: read it (neighbours in a pack come in one get), then create it, here or in the file writer.
    const plain = e.content!.length === 0 ? new Uint8Array(0) : await (small.take(e.name) ?? readChunk(ctx, e.content![0]!, rel));
    if (plain.length !== e.size) throw corrupt(`tree entry ${rel}`, `chunks add up to ${plain.length} bytes, the entry says ${e.size}`);
    const { mode, direct } = createMode(ctx, e);
    const xattrs = keptXattrs(ctx, e.xattrs);
    await place(
      ctx,
      {
        kind: "file",
        path,
        mode,
        direct,
        mtime: e.mtime,
        ...(ctx.opts.owner ? { owner: [e.uid, e.gid] as [number, number] } : {}),
        ...(xattrs ? { xattrs } : {}),
      },
      plain,
    );
    ctx.memory.drop(plain.length);
    if (linkKey) ctx.links.set(linkKey, path);
    ctx.result.files++;
    ctx.result.bytes += e.size!;
    ctx.meter.files++;
    ctx.meter.bytes += e.size!;
    ctx.meter.tick();
    return;
  }
  const { mode, direct } = createMode(ctx, e);
  const fd = openSync(path, CREATE_FLAGS, direct ? mode : 0o600);
  try {
    const written = await writeContent(ctx, fd, e.content!, rel);
    if (written !== e.size) throw corrupt(`tree entry ${rel}`, `chunks add up to ${written} bytes, the entry says ${e.size}`);
    finishFile(ctx, fd, path, e, mode, direct);
  } finally {
    closeSync(fd);
  }
  if (linkKey) ctx.links.set(linkKey, path);
  ctx.result.files++;
  ctx.result.bytes += e.size!;
  ctx.meter.files++;
  ctx.meter.tick();
}

/** A small file or a link: to the file writer once it runs, else created here. */
async function place(ctx: Ctx, job: WriteJob, bytes: Uint8Array): Promise<void> {
  if (++ctx.smallFiles > WRITER_AFTER_FILES)
    ctx.writer ??= new WriteThread((refused) => {
      ctx.result.xattrsSkipped += refused;
    });
  if (ctx.writer?.usable) return ctx.writer.send(job, bytes);
  ctx.result.xattrsSkipped += writeJob(job, bytes);
}

/** The extended attributes the restore's filter keeps. */
function keptXattrs(ctx: Ctx, xattrs: [string, string][] | undefined): [string, string][] | undefined {
  const keep = ctx.opts.xattrs;
  if (!xattrs || keep === false) return undefined;
  const kept = typeof keep === "function" ? xattrs.filter(([name]) => keep(name)) : xattrs;
  return kept.length > 0 ? kept : undefined;
}

/**
 * The mode a file gets, and whether it can be created with it: when the
 * umask leaves it whole and nothing needs a chmod afterwards (a chown clears
 * setuid and setgid bits, and so may a write by a process without
 * CAP_FSETID), which saves a syscall on nearly every file.
 */
function createMode(ctx: Ctx, e: TreeEntry): { mode: number; direct: boolean } {
  const mode = e.mode & (ctx.opts.modeMask ?? 0o7777);
  return { mode, direct: !ctx.opts.owner && (mode & 0o7000) === 0 && (mode & ctx.umask) === 0 };
}

/** Owner, mode, xattrs and times of a file whose bytes are written, through its open descriptor. */
function finishFile(ctx: Ctx, fd: number, path: string, e: TreeEntry, mode: number, direct: boolean): void {
  if (ctx.opts.owner) fchownSync(fd, e.uid, e.gid);
  if (!direct) fchmodSync(fd, mode);
  writeXattrs(ctx, path, e.xattrs);
  setFdTimes(fd, path, BigInt(e.mtime));
}

/**
 * Writes a file's chunks in order. Neighbouring chunks in one pack are read
 * with one ranged get; the next window is read and decompressed (on the
 * thread pool) while the current one is written.
 */
async function writeContent(ctx: Ctx, fd: number, content: string[], rel: string): Promise<number> {
  const locs: Located[] = content.map((id) => ctx.store.locate("data", fromHex(id), `tree entry ${rel}`));
  let next = 0;
  const window = (): Promise<Uint8Array[]> | undefined => {
    if (next >= locs.length) return undefined;
    const groups: Located[][] = [];
    let bytes = 0;
    while (next < locs.length && (bytes === 0 || bytes + locs[next]!.rawLength <= WINDOW_BYTES)) {
      const l = locs[next++]!;
      const last = groups[groups.length - 1];
      const prev = last?.[last.length - 1];
      if (prev && prev.pack === l.pack && prev.offset + prev.length === l.offset) last!.push(l);
      else groups.push([l]);
      bytes += l.rawLength;
    }
    return Promise.all(groups.map((g) => readGroup(ctx.store, g))).then((r) => r.flat());
  };
  let written = 0;
  let pending = window();
  while (pending) {
    const plains = await pending;
    pending = window();
    for (const p of plains) {
      let off = 0;
      while (off < p.length) off += writeSync(fd, p, off, p.length - off);
      written += p.length;
      ctx.meter.bytes += p.length;
      ctx.memory.drop(p.length);
    }
    ctx.meter.tick();
    await turn();
  }
  return written;
}

async function readChunk(ctx: Ctx, id: string, rel: string): Promise<Uint8Array> {
  const loc = ctx.store.locate("data", fromHex(id), `tree entry ${rel}`);
  const stored = await ctx.store.backend.get("packs", loc.pack, { offset: loc.offset, length: loc.length });
  return ctx.store.openStored(loc, stored, false);
}

async function readGroup(store: Store, group: Located[]): Promise<Uint8Array[]> {
  const first = group[0]!;
  const last = group[group.length - 1]!;
  const bytes = await store.backend.get("packs", first.pack, { offset: first.offset, length: last.offset + last.length - first.offset });
  return Promise.all(
    group.map((l) => store.openStored(l, bytes.subarray(l.offset - first.offset, l.offset - first.offset + l.length), false)),
  );
}
