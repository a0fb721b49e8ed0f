// Storing blobs during a save: dedup against the index cache, compress on the
// thread pool, encrypt, append to a pack (data and tree blobs apart, so the
// small tree blobs a browse or a diff reads sit together), upload full packs,
// and write an index file for them. A blob is never reused from a pack that a
// prune mark names (prune.ts relies on it), nor from a pack another process
// has not indexed yet (its writer may die before it does).
import { hex, keyedId } from "./crypto.ts";
import { INLINE_BELOW, compress, compressSync } from "./compress.ts";
import { encodeIndex, type PackRecord } from "./blob-index.ts";
import { stagingFile } from "./backend.ts";
import { MemoryGuard } from "./memory.ts";
import { sealObject } from "./objects.ts";
import { type BlobType, PackWriter } from "./pack.ts";
import type { Store } from "./store.ts";

/** Index files are written at least every this many packs (a crash loses at most this much work). */
export const INDEX_FLUSH_PACKS = 64;
/** Bytes of plaintext waiting for compression at once: bounds a save's memory. */
const IN_FLIGHT_BYTES = 4 * 1024 * 1024;
/** Blobs waiting for compression at once: enough to keep the thread pool busy on two cores. */
const IN_FLIGHT_JOBS = 8;

export interface WriterStats {
  blobsNew: number;
  treesNew: number;
  /** Stored bytes of new blobs (ciphertext and tags; no pack padding or headers). */
  bytesStored: number;
}

export class BlobWriter {
  private readonly packs: Partial<Record<BlobType, PackWriter>> = {};
  /** Ids (hex) stored by this writer whose pack is not yet in the cache's pending tables. */
  private readonly recent = new Set<string>();
  private readonly jobs = new Set<Promise<void>>();
  private inFlight = 0;
  private uploads: Promise<void> = Promise.resolve();
  private pendingPacks = 0;
  private failure: unknown;
  readonly indexFiles: string[] = [];
  readonly stats: WriterStats = { blobsNew: 0, treesNew: 0, bytesStored: 0 };

  private readonly packBytes: number;
  private readonly memory = new MemoryGuard(4 * 1024 * 1024);

  constructor(private readonly store: Store) {
    this.packBytes = store.info.packBytes;
  }

  /**
   * Stores a blob unless the store has a reusable copy; returns its id.
   * `release` is called once the writer holds no reference to `plain`
   * (at once, or when its compression finishes), so callers can reuse buffers.
   */
  async put(type: BlobType, plain: Uint8Array, release?: () => void): Promise<Uint8Array> {
    this.rethrow();
    const id = keyedId(this.store.keys.id, plain);
    const key = `${type}:${hex(id)}`;
    if (this.recent.has(key) || this.store.cache.find(type, id, true)) {
      release?.();
      return id;
    }
    this.recent.add(key);
    if (type === "tree") this.stats.treesNew++;
    else this.stats.blobsNew++;
    if (plain.length < INLINE_BELOW) {
      const c = compressSync(plain);
      this.append(type, id, c.data, c.compressed, plain.length);
      release?.();
      return id;
    }
    while (this.jobs.size > 0 && (this.jobs.size >= IN_FLIGHT_JOBS || this.inFlight + plain.length > IN_FLIGHT_BYTES))
      await Promise.race(this.jobs);
    this.rethrow();
    this.inFlight += plain.length;
    const job: Promise<void> = compress(plain)
      .then((c) => this.append(type, id, c.data, c.compressed, plain.length))
      .catch((err) => {
        this.failure ??= err;
      })
      .finally(() => {
        this.inFlight -= plain.length;
        this.jobs.delete(job);
        release?.();
      });
    this.jobs.add(job);
    return id;
  }

  /** True when a blob with this id is stored or reusable, without storing anything. */
  has(type: BlobType, id: Uint8Array): boolean {
    if (this.recent.has(`${type}:${hex(id)}`)) return true;
    return this.store.cache.find(type, id, true) !== null;
  }

  private rethrow(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  private append(type: BlobType, id: Uint8Array, data: Uint8Array, compressed: boolean, rawLength: number): void {
    let pack = this.packs[type];
    if (!pack) {
      pack = new PackWriter(this.store.keys.enc, stagingFile(this.store.backend), this.packBytes);
      this.packs[type] = pack;
    }
    const entry = pack.add(type, id, data, compressed, rawLength);
    this.stats.bytesStored += entry.length;
    // The compressed copy and the ciphertext are garbage now, and usually the plaintext's buffer.
    this.memory.drop(rawLength + (compressed ? data.length : 0) + entry.length);
    if (pack.size >= this.packBytes) this.rotate(type);
  }

  /** Finishes the open pack of a type and queues its upload. */
  private rotate(type: BlobType): void {
    const pack = this.packs[type];
    if (!pack) return;
    delete this.packs[type];
    const { name, size } = pack.finish();
    const record: PackRecord = { name, size, blobs: pack.entries };
    this.uploads = this.uploads.then(async () => {
      if (this.failure !== undefined) return pack.discard();
      try {
        await this.store.backend.putFile("packs", name, pack.path);
        this.store.cache.addPending(record);
        for (const b of record.blobs) this.recent.delete(`${b.type}:${hex(b.id)}`);
        if (++this.pendingPacks >= INDEX_FLUSH_PACKS) await this.writeIndex();
      } catch (err) {
        this.failure ??= err;
        pack.discard();
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

  /** Waits for every blob, uploads the last packs and writes their index file. After this, every id put() returned is in the store. */
  async flush(): Promise<void> {
    while (this.jobs.size > 0) await Promise.race(this.jobs);
    this.rethrow();
    this.rotate("data");
    this.rotate("tree");
    await this.uploads;
    this.rethrow();
    await this.writeIndex();
  }

  /** Stops a failed save: drops open packs and their temporary files. Uploaded packs stay for prune. */
  async discard(): Promise<void> {
    this.failure ??= new Error("save abandoned");
    await Promise.allSettled([...this.jobs]);
    for (const t of ["data", "tree"] as const) {
      this.packs[t]?.discard();
      delete this.packs[t];
    }
    await this.uploads;
  }
}
