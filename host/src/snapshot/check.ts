// check: is every snapshot whole? Reads every index file, snapshot and tree
// the store holds (the local cache is rebuilt from the index files, so what is
// checked is the store, not a copy of it) and confirms every pack the index
// names exists with its size. With readData it also reads every pack: its
// bytes against its name, its header against the index, and every blob
// through authentication, decompression and its keyed id. Problems are
// collected, each naming its object; check does not stop at the first.
import { decodeIndex, type PackRecord } from "./blob-index.ts";
import { contentHash, fromHex, hex } from "./crypto.ts";
import { StoreError } from "./errors.ts";
import { acquireMaintenance } from "./lock.ts";
import { MarkBody, getJson, openObject } from "./objects.ts";
import { TRAILER_BYTES, describeBlob, parseHeader, parseTrailer } from "./pack.ts";
import { Meter, type ProgressFn } from "./progress.ts";
import { listSaves } from "./saves.ts";
import type { SnapshotRecord, Store } from "./store.ts";
import type { TreeEntry } from "./tree.ts";
import { SnapshotBody } from "./objects.ts";
import { turn } from "./turns.ts";

export interface CheckOptions {
  readData?: boolean;
  progress?: ProgressFn;
  signal?: AbortSignal;
}

export interface Problem {
  object: string;
  message: string;
}

export interface CheckResult {
  ok: boolean;
  errors: Problem[];
  /** Not damage: packs no index lists (a crashed save's; the next prune removes them), a lock taken over. */
  notes: string[];
  snapshots: number;
  trees: number;
  packs: number;
  packsRead: number;
  bytesRead: number;
  ms: number;
}

function problem(err: unknown, fallback: string): Problem {
  if (err instanceof StoreError) return { object: err.object ?? fallback, message: err.message };
  return { object: fallback, message: `${fallback}: ${(err as Error)?.message ?? String(err)}` };
}

export async function check(store: Store, opts: CheckOptions = {}): Promise<CheckResult> {
  const t0 = performance.now();
  const meter = new Meter("check", opts.progress);
  const res: CheckResult = { ok: false, errors: [], notes: [], snapshots: 0, trees: 0, packs: 0, packsRead: 0, bytesRead: 0, ms: 0 };
  const lock = await acquireMaintenance(store, "check");
  if (lock.tookOver) res.notes.push(`took over the maintenance lock of ${lock.tookOver}`);
  try {
    // Index files, read from the store and loaded into a fresh cache.
    meter.phase = "index";
    const cache = store.cache;
    cache.removeFiles([...cache.files()]);
    const indexed = new Map<string, PackRecord>();
    for await (const info of store.backend.list("index")) {
      const object = `index/${info.name}`;
      try {
        const body = openObject(store.keys.enc, "index", info.name, await store.backend.get("index", info.name));
        const packs = [...decodeIndex(object, body)];
        cache.addFile(info.name, packs);
        for (const p of packs) {
          const seen = indexed.get(p.name);
          if (seen && seen.size !== p.size)
            res.errors.push({
              object,
              message: `${object}: says packs/${p.name} has ${p.size} bytes, another index file says ${seen.size}`,
            });
          indexed.set(p.name, p);
        }
      } catch (err) {
        res.errors.push(problem(err, object));
      }
    }
    const listed = new Map<string, number>();
    for await (const info of store.backend.list("packs")) listed.set(info.name, info.size);
    for (const [name, p] of indexed) {
      const size = listed.get(name);
      if (size === undefined)
        res.errors.push({ object: `packs/${name}`, message: `packs/${name} is in the index but missing from the store` });
      else if (size !== p.size)
        res.errors.push({
          object: `packs/${name}`,
          message: `packs/${name} has ${size} bytes, the index says ${p.size} (truncated or replaced)`,
        });
    }
    const orphans = [...listed.keys()].filter((n) => !indexed.has(n));
    if (orphans.length > 0)
      res.notes.push(`${orphans.length} pack(s) no index file lists (left by an interrupted save or prune; the next prune removes them)`);
    res.packs = listed.size;

    try {
      const stale = (await listSaves(store)).filter((r) => r.stale).length;
      if (stale > 0)
        res.notes.push(`${stale} save registration(s) of saves that cannot commit any more (interrupted; the next prune removes them)`);
    } catch (err) {
      res.errors.push(problem(err, "saves"));
    }

    for await (const info of store.backend.list("marks")) {
      try {
        await getJson(store.backend, store.keys.enc, "marks", info.name, MarkBody, info.size);
      } catch (err) {
        res.errors.push(problem(err, `marks/${info.name}`));
      }
    }

    // Snapshots and every tree and chunk they need.
    meter.phase = "snapshots";
    const snaps: SnapshotRecord[] = [];
    for await (const info of store.backend.list("snapshots")) {
      try {
        snaps.push({ name: info.name, ...(await getJson(store.backend, store.keys.enc, "snapshots", info.name, SnapshotBody, info.size)) });
      } catch (err) {
        res.errors.push(problem(err, `snapshots/${info.name}`));
      }
    }
    res.snapshots = snaps.length;
    const db = cache.database;
    db.exec("CREATE TEMP TABLE IF NOT EXISTS checked_trees (id BLOB PRIMARY KEY) WITHOUT ROWID; DELETE FROM temp.checked_trees;");
    const firstVisit = db.query<unknown, [Uint8Array]>("INSERT OR IGNORE INTO temp.checked_trees (id) VALUES (?)");
    for (const snap of snaps) {
      const stack: { id: string; path: string }[] = [{ id: snap.tree, path: "" }];
      while (stack.length > 0) {
        opts.signal?.throwIfAborted();
        await turn();
        const { id, path } = stack.pop()!;
        if (firstVisit.run(fromHex(id)).changes === 0) continue;
        res.trees++;
        const where = `snapshot ${snap.id}${path ? `, ${path}` : ""}`;
        let entries: TreeEntry[];
        try {
          entries = await store.readTree(id, where);
        } catch (err) {
          res.errors.push(problem(err, `snapshots/${snap.name}`));
          continue;
        }
        for (const e of entries) {
          const rel = path ? `${path}/${e.name}` : e.name;
          if (e.type === "dir") stack.push({ id: e.tree!, path: rel });
          else if (e.type === "file") {
            for (const c of e.content!) {
              if (!cache.find("data", fromHex(c), false))
                res.errors.push({
                  object: `snapshots/${snap.name}`,
                  message: `snapshot ${snap.id}: ${rel} needs ${describeBlob("data", fromHex(c))}, which no index file lists`,
                });
            }
          }
        }
        meter.files = res.trees;
        meter.tick();
      }
    }

    if (opts.readData) {
      meter.phase = "read";
      meter.bytesTotal = [...indexed.values()].reduce((n, p) => n + p.size, 0);
      for (const [name, p] of indexed) {
        if (!listed.has(name)) continue;
        opts.signal?.throwIfAborted();
        await readPack(store, name, p, res);
        meter.bytes = res.bytesRead;
        meter.tick();
      }
    }
  } finally {
    await lock.release();
  }
  res.ok = res.errors.length === 0;
  res.ms = Math.round(performance.now() - t0);
  meter.finish();
  return res;
}

async function readPack(store: Store, name: string, indexed: PackRecord, res: CheckResult): Promise<void> {
  const object = `packs/${name}`;
  try {
    const bytes = await store.backend.get("packs", name);
    res.packsRead++;
    res.bytesRead += bytes.length;
    if (contentHash(bytes) !== name)
      res.errors.push({ object, message: `${object}: content does not match its name (damaged or altered)` });
    const { salt, headerLength } = parseTrailer(object, bytes.subarray(bytes.length - TRAILER_BYTES), bytes.length);
    const header = parseHeader(
      object,
      store.keys.enc,
      salt,
      bytes.subarray(bytes.length - TRAILER_BYTES - headerLength, bytes.length - TRAILER_BYTES),
      bytes.length,
    );
    const byOffset = new Map(header.map((e) => [e.offset, e]));
    for (const b of indexed.blobs) {
      await turn();
      const h = byOffset.get(b.offset);
      if (
        !h ||
        hex(h.id) !== hex(b.id) ||
        h.type !== b.type ||
        h.length !== b.length ||
        h.rawLength !== b.rawLength ||
        h.flags !== b.flags
      ) {
        res.errors.push({
          object,
          message: `${object}: the index entry for ${describeBlob(b.type, b.id)} does not match the pack's header`,
        });
        continue;
      }
      try {
        await store.openStored({ ...b, pack: name, packSize: bytes.length }, bytes.subarray(b.offset, b.offset + b.length));
      } catch (err) {
        res.errors.push(problem(err, object));
      }
    }
  } catch (err) {
    res.errors.push(problem(err, object));
  }
}
