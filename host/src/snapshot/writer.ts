// Storing blobs during a save: dedup against the index cache, seal what is
// new (sealer.ts: compress, encrypt, append to a pack), upload full packs, and
// write an index file for them. A small save seals on its own thread; once a
// save has more new plaintext than THREAD_AFTER_BYTES it starts a seal worker
// (seal-thread.ts) and hands it the rest, so a large save uses a second core.
// A blob is never reused from a pack that a prune mark names (prune.ts relies
// on it), nor from a pack another process has not indexed yet (its writer may
// die before it does).
import { unlinkSync } from "node:fs";
import { hex, keyedId } from "./crypto.ts";
import { encodeIndex, type PackRecord } from "./blob-index.ts";
import { sealObject } from "./objects.ts";
import { type BlobType, decodeEntries } from "./pack.ts";
import { SealThread } from "./seal-thread.ts";
import { type SealedPack, Sealer, type SealerConfig } from "./sealer.ts";
import type { Store } from "./store.ts";

/** Index files are written at least every this many packs (a crash loses at most this much work). */
export const INDEX_FLUSH_PACKS = 64;
/**
 * New plaintext a save seals on its own thread before it starts a seal
 * worker: a small save (a one-file change, a fresh box) never pays the
 * worker's start (~50 ms) and memory (~10 MB of runtime and a 4 MiB ring),
 * and the worker loads while the save goes on.
 */
export const THREAD_AFTER_BYTES = 8 * 1024 * 1024;
/**
 * While a worker seals, the saving thread makes no garbage of sealing for its
 * MemoryGuard to count, only a little per file (stats, names, ids, tree
 * entries), which the collector leaves for a long time: a full collection
 * every this many blobs handed over keeps it down.
 */
const GC_EVERY_BLOBS = 1000;

export interface WriterStats {
  blobsNew: number;
  treesNew: number;
  /** Stored bytes of new blobs (ciphertext and tags; no pack padding or headers). */
  bytesStored: number;
}

export interface WriterOptions {
  /** Seal on the saving thread only (default: a worker once the save is large). */
  thread?: boolean;
}

export class BlobWriter {
  /** Ids (hex) stored by this writer whose pack is not yet in the cache's pending tables. */
  private readonly recent = new Set<string>();
  private uploads: Promise<void> = Promise.resolve();
  private pendingPacks = 0;
  private failure: unknown;
  private readonly config: SealerConfig;
  private readonly sealer: Sealer;
  private thread: SealThread | undefined;
  private newBytes = 0;
  private readonly useThread: boolean;
  readonly indexFiles: string[] = [];
  readonly stats: WriterStats = { blobsNew: 0, treesNew: 0, bytesStored: 0 };
  /** Blobs sealed by the seal worker (the rest were sealed on the saving thread). */
  sealedOffThread = 0;

  constructor(
    private readonly store: Store,
    opts: WriterOptions = {},
  ) {
    this.config = { enc: store.keys.enc, stagingDir: store.backend.stagingDir(), packBytes: store.info.packBytes };
    this.sealer = new Sealer(this.config);
    this.useThread = opts.thread ?? true;
  }

  /**
   * Stores a blob unless the store has a reusable copy; returns its id. The
   * writer keeps no reference to `plain` once this resolves, so callers may
   * reuse its buffer. One call at a time.
   */
  async put(type: BlobType, plain: Uint8Array): Promise<Uint8Array> {
    this.rethrow();
    const id = keyedId(this.store.keys.id, plain);
    const key = `${type}:${hex(id)}`;
    if (this.recent.has(key) || this.store.cache.find(type, id, true)) return id;
    this.recent.add(key);
    if (type === "tree") this.stats.treesNew++;
    else this.stats.blobsNew++;
    this.newBytes += plain.length;
    const thread = this.threadFor();
    if (thread) {
      await thread.send({ type, id }, plain);
      // What the walk leaves per file is small but collected late: a first save of 20k files peaked at 161–168 MB without this, 135–143 with it.
      if (++this.sealedOffThread % GC_EVERY_BLOBS === 0) Bun.gc(true);
      return id;
    }
    const r = this.sealer.add(type, id, plain);
    this.stats.bytesStored += r.stored;
    if (r.filled) this.upload(r.filled);
    return id;
  }

  /** The seal worker, once the save is large enough and it has started; undefined while blobs are sealed here. */
  private threadFor(): SealThread | undefined {
    if (!this.useThread || this.newBytes <= THREAD_AFTER_BYTES) return undefined;
    this.thread ??= new SealThread(this.config, ({ stored, packs }) => {
      this.stats.bytesStored += stored;
      for (const p of packs) this.upload(p);
    });
    return this.thread.usable ? this.thread : undefined;
  }

  /** True when a blob with this id is stored or reusable, without storing anything. */
  has(type: BlobType, id: Uint8Array): boolean {
    if (this.recent.has(`${type}:${hex(id)}`)) return true;
    return this.store.cache.find(type, id, true) !== null;
  }

  private rethrow(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** Queues a finished pack's upload; its blobs are then found through the cache's pending tables. */
  private upload(pack: SealedPack): void {
    const record: PackRecord = { name: pack.name, size: pack.size, blobs: decodeEntries(pack.name, pack.entries, pack.size) };
    this.uploads = this.uploads.then(async () => {
      if (this.failure !== undefined) return dropFile(pack.path);
      try {
        await this.store.backend.putFile("packs", pack.name, pack.path);
        this.store.cache.addPending(record);
        for (const b of record.blobs) this.recent.delete(`${b.type}:${hex(b.id)}`);
        if (++this.pendingPacks >= INDEX_FLUSH_PACKS) await this.writeIndex();
      } catch (err) {
        this.failure ??= err;
        dropFile(pack.path);
      }
    });
  }

  private async writeIndex(): Promise<void> {
    const pending = this.store.cache.pending();
    this.pendingPacks = 0;
    if (pending.length === 0) return;
    const { name, bytes } = sealObject(this.store.keys.enc, "index", encodeIndex(pending));
    await this.store.backend.put("index", name, bytes);
    this.store.cache.commitPending(name);
    this.indexFiles.push(name);
  }

  /** Seals every blob, uploads the last packs and writes their index file. After this, every id put() returned is in the store. */
  async flush(): Promise<void> {
    this.rethrow();
    for (const p of (await this.thread?.flush()) ?? []) this.upload(p);
    for (const p of this.sealer.finishAll()) this.upload(p);
    await this.uploads;
    this.rethrow();
    await this.writeIndex();
  }

  /** Stops a failed save: drops open packs and their temporary files. Uploaded packs stay for prune. */
  async discard(): Promise<void> {
    this.failure ??= new Error("save abandoned");
    await this.thread?.discard();
    this.sealer.discard();
    await this.uploads;
  }
}

function dropFile(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already moved or removed.
  }
}
