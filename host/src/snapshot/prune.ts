// prune: forget snapshots by policy, then reclaim space in two phases, never
// holding anything a save waits for.
//
//   mark    packs no snapshot needs (and packs no index file lists) are named
//           in a mark, written twice: pending (packs only, so saves that load
//           marks from now on skip them), then final, with the registered
//           saves (saves.ts) listed after the pending mark was visible: the
//           saves that may have missed it. Packs that are mostly garbage have
//           their live blobs copied out first.
//   delete  a later prune takes final marks older than the grace period whose
//           saves have all ended, and deletes each pack in them unless a
//           snapshot now needs a blob that has no other copy outside every
//           mark (then the pack simply lives on).
//
// Why a finished snapshot never loses a chunk, whatever any write costs: a
// save that loaded the marks after a pending mark was visible never reuses
// its packs (the writer skips them); a save that loaded them before was
// registered before that, so it is in the final mark. The delete phase lists
// registrations before it lists snapshots: a save in the mark that is no
// longer registered wrote its snapshot before that listing (or gave up), so
// every snapshot that can need a marked pack is seen, and the pack is kept.
// A registration left by a dead process, or one older than the longest a
// save may run, is stale (saves.ts: such a save can no longer commit).
// A pending mark found by the next prune is a dead prune's; it is dropped.
// Index files are rewritten before any pack goes, and old ones removed before
// packs, so a crash at any point leaves no index naming a missing pack.
import { encodeIndex, MAX_INDEX_ENTRIES, type PackRecord } from "./blob-index.ts";
import { StoreError } from "./errors.ts";
import { acquireMaintenance } from "./lock.ts";
import { type MarkBody, putJson, sealObject } from "./objects.ts";
import { type KeepPolicy, keptByPolicy } from "./policy.ts";
import { Meter, type ProgressFn } from "./progress.ts";
import { RefSet } from "./refs.ts";
import { listSaves } from "./saves.ts";
import type { SnapshotRecord, Store } from "./store.ts";
import { turn } from "./turns.ts";
import { BlobWriter } from "./writer.ts";

/** More index files than this (one per save) are folded into one by the next prune. */
const COMPACT_ABOVE = 16;

/** Points where a prune awaits `pause` (a test seam for forcing interleavings with saves). */
export type PrunePoint = "snapshots-listed" | "marks-loaded" | "before-delete" | "before-mark" | "mark-stamped";

export interface PruneOptions {
  /** Which snapshots to keep; default (or {}) keeps them all and only reclaims garbage. */
  policy?: KeepPolicy;
  /** How old a mark must be before its packs go; at least the store's own grace period (a shorter one is refused). */
  graceMs?: number;
  /** A pack with more than this fraction of its bytes unreferenced has its live blobs copied out and is marked (default 0.1). */
  maxUnused?: number;
  dryRun?: boolean;
  progress?: ProgressFn;
  signal?: AbortSignal;
  pause?: (point: PrunePoint) => Promise<void>;
}

export interface PruneResult {
  forgotten: string[];
  /** Packs marked by this run (their deletion waits for the grace period). */
  marked: { packs: number; bytes: number };
  /** Packs deleted by this run (marked by an earlier one, grace ago or more). */
  deleted: { packs: number; bytes: number };
  /** Marked packs found needed again at delete time, and so kept. */
  revived: number;
  /** Marks old enough whose deletion waits for a save that may have missed them. */
  waiting: number;
  repacked: { packs: number; blobs: number; bytes: number };
  indexFiles: { removed: number; written: number };
  /** A dead holder's lock this run took over. */
  tookOverLock?: string;
  ms: number;
}

interface PackUse {
  name: string;
  size: number;
  total: number;
  used: number;
}

export async function prune(store: Store, opts: PruneOptions = {}): Promise<PruneResult> {
  const t0 = performance.now();
  const grace = opts.graceMs ?? store.info.graceMs;
  if (grace < store.info.graceMs) {
    throw new StoreError(
      "invalid",
      `a grace period of ${grace} ms is shorter than this store's ${store.info.graceMs} ms, which its saves are bounded by`,
      "leave graceMs out to use the store's",
    );
  }
  const meter = new Meter("prune", opts.progress);
  const result: PruneResult = {
    forgotten: [],
    marked: { packs: 0, bytes: 0 },
    deleted: { packs: 0, bytes: 0 },
    revived: 0,
    waiting: 0,
    repacked: { packs: 0, blobs: 0, bytes: 0 },
    indexFiles: { removed: 0, written: 0 },
    ms: 0,
  };
  const lock = await acquireMaintenance(store, "prune");
  if (lock.tookOver) result.tookOverLock = lock.tookOver;
  try {
    const now = store.clock();
    // Registrations first, snapshots after (the header says why).
    const saves = await listSaves(store);
    const snaps = await forget(store, opts, meter, result);
    const refs = await needed(store, snaps, opts, meter);
    const marks = await store.loadMarks();
    await opts.pause?.("marks-loaded");
    const { due, pending, doomed, listed } = await deletePhase(store, { saves, marks, now, grace }, opts, meter, result);
    await markPhase(store, refs, { marks, due, pending, doomed, listed }, opts, meter, result);
  } finally {
    await lock.release();
  }
  result.ms = Math.round(performance.now() - t0);
  meter.finish();
  return result;
}

/** Forgets the snapshots the policy does not keep; returns those it keeps. */
async function forget(store: Store, opts: PruneOptions, meter: Meter, result: PruneResult): Promise<SnapshotRecord[]> {
  meter.phase = "forget";
  const snaps = await store.listSnapshots();
  const keep = keptByPolicy(snaps, opts.policy ?? {});
  for (const s of snaps) {
    if (keep.has(s.id)) continue;
    result.forgotten.push(s.id);
    if (!opts.dryRun) await store.backend.delete("snapshots", s.name);
  }
  await opts.pause?.("snapshots-listed");
  return snaps.filter((s) => keep.has(s.id));
}

/** What the remaining snapshots need; the index is read after the listing, so it has every listed snapshot's packs. */
async function needed(store: Store, snaps: SnapshotRecord[], opts: PruneOptions, meter: Meter): Promise<RefSet> {
  meter.phase = "mark";
  await store.syncIndex();
  const refs = new RefSet(store.cache.database);
  for (const s of snaps) {
    await refs.addSnapshot(store, s, opts.signal);
    meter.files = refs.files;
    meter.tick();
  }
  return refs;
}

/** A mark as the store loads it. */
type Mark = { name: string; body: MarkBody };

/**
 * Deletes the packs of marks old enough whose saves have all ended, but a
 * pack some snapshot needs again (revived); index files are rewritten
 * without them first. Returns what the mark phase goes on from.
 */
async function deletePhase(
  store: Store,
  { saves, marks, now, grace }: { saves: Awaited<ReturnType<typeof listSaves>>; marks: Mark[]; now: number; grace: number },
  opts: PruneOptions,
  meter: Meter,
  result: PruneResult,
) {
  meter.phase = "delete";
  const cache = store.cache;
  const live = new Set(saves.filter((r) => !r.stale).map((r) => r.name));
  const pending = marks.filter((m) => m.body.saves === undefined);
  const old = marks.filter((m) => m.body.saves !== undefined && now - m.body.time >= grace);
  const due = old.filter((m) => !m.body.saves!.some((r) => live.has(r)));
  result.waiting = old.length - due.length;
  const needed = cache.database.query<{ n: number }, [string]>(
    `SELECT 1 AS n FROM blobs b JOIN packs p ON p.id = b.pack JOIN temp.ref_blobs r ON r.id = b.id AND r.type = b.type
       WHERE p.name = ?1 AND NOT EXISTS (
         SELECT 1 FROM blobs b2 JOIN packs p2 ON p2.id = b2.pack JOIN files f2 ON f2.id = p2.file
         WHERE b2.id = b.id AND b2.type = b.type AND f2.name NOT LIKE 'pending:%' AND p2.name NOT IN (SELECT name FROM temp.marked)) LIMIT 1`,
  );
  // What this prune rewrites and then deletes: the index files as they are now, and their packs, read together.
  const { files, packs: known } = cache.snapshotFiles();
  const listed = new Map<string, number>();
  for await (const info of store.backend.list("packs")) listed.set(info.name, info.size);
  const doomed = new Set<string>();
  for (const m of due) {
    for (const p of m.body.packs) {
      if (needed.get(p)) result.revived++;
      else if (listed.has(p) || known.has(p)) doomed.add(p);
    }
  }
  await opts.pause?.("before-delete");
  if (!opts.dryRun && (doomed.size > 0 || files.length > COMPACT_ABOVE)) {
    const written = await rewriteIndex(store, new Map([...known].filter(([p]) => !doomed.has(p))));
    result.indexFiles.written = written.length;
    for (const f of files) await store.backend.delete("index", f);
    result.indexFiles.removed = files.length;
    await store.syncIndex();
  }
  if (!opts.dryRun) {
    for (const p of doomed) {
      await store.backend.delete("packs", p);
      result.deleted.packs++;
      result.deleted.bytes += listed.get(p) ?? known.get(p) ?? 0;
    }
    for (const m of [...due, ...pending]) await store.backend.delete("marks", m.name);
    for (const r of saves) if (r.stale) await store.backend.delete("saves", r.name);
  }
  meter.tick();
  return { due, pending, doomed, listed };
}

/**
 * Marks garbage no mark names yet: packs nothing uses, packs no index file
 * lists, and packs mostly unused once their live blobs are copied out. The
 * mark is written pending, then final with the saves registered by then.
 */
async function markPhase(
  store: Store,
  refs: RefSet,
  {
    marks,
    due,
    pending,
    doomed,
    listed,
  }: { marks: Mark[]; due: Mark[]; pending: Mark[]; doomed: Set<string>; listed: Map<string, number> },
  opts: PruneOptions,
  meter: Meter,
  result: PruneResult,
): Promise<void> {
  const maxUnused = opts.maxUnused ?? 0.1;
  await opts.pause?.("before-mark");
  const stillMarked = new Set(marks.filter((m) => !due.includes(m) && !pending.includes(m)).flatMap((m) => m.body.packs));
  const usage = packUsage(store);
  const toMark: string[] = [];
  const toRepack: PackUse[] = [];
  for (const u of usage) {
    if (doomed.has(u.name) || stillMarked.has(u.name)) continue;
    if (u.used === 0) toMark.push(u.name);
    else if (u.total - u.used > maxUnused * u.total) toRepack.push(u);
  }
  // Packs no index file lists: a crashed save's, or a running save's not yet indexed (the delete phase spares those once they are).
  const indexed = store.cache.packs();
  for (const [name] of listed) if (!indexed.has(name) && !doomed.has(name) && !stillMarked.has(name)) toMark.push(name);
  if (!opts.dryRun && toRepack.length > 0) {
    const copied = await repack(store, refs, toRepack, [...stillMarked, ...toRepack.map((u) => u.name)]);
    result.repacked = { packs: toRepack.length, blobs: copied.blobs, bytes: copied.bytes };
    meter.bytesNew = copied.bytes;
    toMark.push(...toRepack.map((u) => u.name));
  }
  if (toMark.length === 0) return;
  result.marked.packs = toMark.length;
  result.marked.bytes = toMark.reduce((n, p) => n + (listed.get(p) ?? indexed.get(p) ?? 0), 0);
  if (opts.dryRun) return;
  const body: MarkBody = { v: 1, time: store.clock(), packs: toMark };
  await opts.pause?.("mark-stamped");
  const pendingName = await putJson(store.backend, store.keys.enc, "marks", body);
  const registered = (await listSaves(store)).filter((r) => !r.stale).map((r) => r.name);
  await putJson(store.backend, store.keys.enc, "marks", { ...body, saves: registered } satisfies MarkBody);
  await store.backend.delete("marks", pendingName);
}

/** Referenced and total stored bytes of every indexed pack. */
function packUsage(store: Store): PackUse[] {
  return store.cache.database
    .query<PackUse, []>(
      `SELECT name, size, SUM(length) AS total, SUM(CASE WHEN ref THEN length ELSE 0 END) AS used FROM (
         SELECT DISTINCT p.name AS name, p.size AS size, b.id, b.type, b.length AS length, r.id IS NOT NULL AS ref
         FROM packs p JOIN files f ON f.id = p.file JOIN blobs b ON b.pack = p.id LEFT JOIN temp.ref_blobs r ON r.id = b.id AND r.type = b.type
         WHERE f.name NOT LIKE 'pending:%')
       GROUP BY name`,
    )
    .all();
}

/** Copies the referenced blobs of `packs` into new packs (indexed) so the old ones can be marked. */
async function repack(store: Store, refs: RefSet, packs: PackUse[], excluded: string[]): Promise<{ blobs: number; bytes: number }> {
  // The packs being emptied must not count as copies, or the writer would find the blob there and skip it.
  store.cache.setMarked(excluded);
  const writer = new BlobWriter(store);
  let blobs = 0;
  try {
    for (const p of packs) {
      for (const b of store.cache.blobsOf(p.name)) {
        await turn();
        if (!refs.has(b.type, b.id)) continue;
        const plain = await store.readBlob(b.type, b.id, `packs/${p.name}`);
        await writer.put(b.type, plain);
        blobs++;
      }
    }
    await writer.flush();
  } catch (err) {
    await writer.discard();
    throw err;
  }
  return { blobs, bytes: writer.stats.bytesStored };
}

/** Writes the index of `keep` (pack → size) as new index files (split at MAX_INDEX_ENTRIES); returns their names. */
async function rewriteIndex(store: Store, keep: Map<string, number>): Promise<string[]> {
  const names: string[] = [];
  let batch: PackRecord[] = [];
  let entries = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const { name, bytes } = sealObject(store.keys.enc, "index", encodeIndex(batch));
    await store.backend.put("index", name, bytes);
    names.push(name);
    batch = [];
    entries = 0;
  };
  for (const [p, size] of keep) {
    const blobs = store.cache.blobsOf(p);
    if (entries + blobs.length > MAX_INDEX_ENTRIES) await flush();
    batch.push({ name: p, size, blobs });
    entries += blobs.length;
  }
  await flush();
  return names;
}
