// A large save's second core: the saving thread reads, chunks, hashes and
// dedups; the seal worker (seal-worker.ts) compresses, encrypts and writes
// packs. New plaintext crosses in a shared ring, so the saving thread copies
// each new blob once and reuses its read buffers at once, and the save's
// memory is bounded by the ring whatever the worker's pace: a full ring makes
// the saving thread wait. A blob too large for the ring crosses on its own,
// transferred. One save, one worker, ended by flush() or discard().
//
// A save is one long run of synchronous reads that rarely yields to the event
// loop, so what the saving thread must know at once is in shared memory, not
// in messages: that the worker is ready, and how much of the ring it has
// handed back (with Atomics.wait to sleep on while the ring is full). Filled
// packs and stored bytes come as messages, taken whenever the save yields.
//
// Measured on scripts/bench's tree (20k small files, 300 MiB of large ones,
// 2 cores): a first save took 2.4–2.7 s sealing on the saving thread, where
// sealing was half of its CPU (README, "measurements").
import type { BlobType } from "./pack.ts";
import type { BlobJob, FromSealer, ToSealer } from "./seal-wire.ts";
import type { SealedPack, SealerConfig } from "./sealer.ts";

/** Plaintext waiting to be sealed, at most: the default largest chunk (8 MiB was no faster, ~4 MB more). */
const RING_BYTES = 4 * 1024 * 1024;
/** Blobs are handed to the worker in batches of about this many bytes, or this many blobs. */
const BATCH_BYTES = 256 * 1024;
const BATCH_JOBS = 128;

/**
 * Where the worker's entry is. Run from source, beside this file; in the
 * compiled binary, the entry point scripts/build.ts adds, named by its path
 * from the build's root (host/src).
 */
function workerUrl(): string {
  return import.meta.url.includes("/$bunfs/") ? "./snapshot/seal-worker.ts" : new URL("./seal-worker.ts", import.meta.url).href;
}

export class SealThread {
  private readonly worker: Worker;
  private readonly ring = new SharedArrayBuffer(RING_BYTES);
  private readonly view = new Uint8Array(this.ring);
  /** Shared with the worker: [0] 1 once it is ready, [1] a count of batches sealed (to wait on); bytes 8..16 the tail. */
  private readonly control = new SharedArrayBuffer(16);
  private readonly flags = new Int32Array(this.control, 0, 2);
  private readonly sealedTo = new BigInt64Array(this.control, 8, 1);
  /** Batches sealed when the saving thread last yielded to take the worker's messages. */
  private taken = 0;
  /** Ring bytes handed out, as a running total; [tail, head) is in use, the tail being what the worker has handed back. */
  private head = 0;
  private batch: BlobJob[] = [];
  private batchBytes = 0;
  private pending: { resolve: (packs: SealedPack[]) => void; reject: (err: Error) => void } | undefined;
  private failure: Error | undefined;
  private state: "starting" | "ready" | "failed" | "ended" = "starting";
  private readonly created = performance.now();

  /**
   * @param onSealed called as batches are sealed: their stored bytes and the packs they filled
   */
  constructor(
    config: SealerConfig,
    private readonly onSealed: (stored: number, packs: SealedPack[]) => void,
  ) {
    this.worker = new Worker(workerUrl());
    this.worker.unref();
    this.worker.onmessage = (e: MessageEvent<FromSealer>) => this.receive(e.data);
    this.worker.onerror = (e) => this.fail(new Error(`the seal worker failed: ${e.message}`));
    this.post({ t: "init", config, ring: this.ring, control: this.control });
  }

  /** True once the worker has started; before that, and if it never does, the caller seals on its own thread. */
  get ready(): boolean {
    if (this.state === "starting" && Atomics.load(this.flags, 0) === 1) this.state = "ready";
    return this.state === "ready";
  }

  /** Milliseconds since the worker was asked to start. */
  get startedMs(): number {
    return performance.now() - this.created;
  }

  get error(): Error | undefined {
    return this.failure;
  }

  /** Queues one blob; waits while the ring is full. The caller may reuse `plain` once this resolves. One call at a time. */
  async send(type: BlobType, id: Uint8Array, plain: Uint8Array): Promise<void> {
    this.rethrow();
    const len = plain.length;
    if (len > RING_BYTES / 2) return this.sendAlone(type, id, plain);
    for (;;) {
      const seen = Atomics.load(this.flags, 1);
      const tail = Number(Atomics.load(this.sealedTo, 0));
      const pos = this.head % RING_BYTES;
      // A blob never wraps: one that does not fit before the ring's end starts at its beginning.
      const start = pos + len > RING_BYTES ? this.head + RING_BYTES - pos : this.head;
      if (start + len - tail <= RING_BYTES) {
        const off = start % RING_BYTES;
        this.view.set(plain, off);
        this.head = start + len;
        this.batch.push({ type, id, off, len });
        this.batchBytes += len;
        if (this.batchBytes >= BATCH_BYTES || this.batch.length >= BATCH_JOBS) this.postBatch();
        // The worker sealed more: yield, so its packs are uploaded as they fill, not all at the end.
        if (seen !== this.taken) {
          this.taken = seen;
          await new Promise((resolve) => setImmediate(resolve));
        }
        return;
      }
      await this.waitForWorker(seen);
    }
  }

  /**
   * A blob too large for the ring crosses on its own, transferred, once the
   * ring is empty, and takes the whole ring's worth of the count while it is
   * sealed: one such blob in flight at a time, nothing beside it.
   */
  private async sendAlone(type: BlobType, id: Uint8Array, plain: Uint8Array): Promise<void> {
    for (;;) {
      const seen = Atomics.load(this.flags, 1);
      if (Number(Atomics.load(this.sealedTo, 0)) >= this.head) break;
      await this.waitForWorker(seen);
    }
    const bytes = plain.slice();
    this.head += RING_BYTES;
    this.post({ t: "seal", jobs: [{ type, id, off: 0, len: plain.length, bytes }], end: this.head }, [bytes.buffer as ArrayBuffer]);
  }

  /** Hands over what is batched and sleeps until the worker seals a batch; now and then yields instead, so a message saying it failed gets in. */
  private async waitForWorker(seen: number): Promise<void> {
    this.postBatch();
    if (Atomics.wait(this.flags, 1, seen, 100) === "timed-out") await new Promise((resolve) => setImmediate(resolve));
    this.rethrow();
  }

  /** Seals what is queued and finishes the open packs; returns those packs. The worker ends. */
  async flush(): Promise<SealedPack[]> {
    this.rethrow();
    this.postBatch();
    const packs = await new Promise<SealedPack[]>((resolve, reject) => {
      this.pending = { resolve, reject };
      this.post({ t: "flush" });
    });
    this.end();
    return packs;
  }

  /** Drops what is queued and the open packs' files; the worker ends. */
  async discard(): Promise<void> {
    if (this.state === "ready" || this.state === "starting") {
      this.batch = [];
      await new Promise<unknown>((resolve) => {
        this.pending = { resolve, reject: resolve };
        this.post({ t: "discard" });
      });
    }
    this.end();
  }

  /** Ends a worker that was never handed a blob. */
  close(): void {
    this.end();
  }

  private end(): void {
    if (this.state !== "failed") this.state = "ended";
    this.worker.terminate();
  }

  private postBatch(): void {
    if (this.batch.length === 0) return;
    this.post({ t: "seal", jobs: this.batch, end: this.head });
    this.batch = [];
    this.batchBytes = 0;
  }

  private post(m: ToSealer, transfer: ArrayBuffer[] = []): void {
    this.worker.postMessage(m, transfer);
  }

  private receive(m: FromSealer): void {
    if (m.t === "ready") {
      if (this.state === "starting") this.state = "ready";
    } else if (m.t === "sealed") {
      this.onSealed(m.stored, m.packs);
    } else if (m.t === "flushed") {
      this.pending?.resolve(m.packs);
      this.pending = undefined;
    } else if (m.t === "discarded") {
      this.pending?.resolve([]);
      this.pending = undefined;
    } else {
      this.fail(new Error(`sealing failed: ${m.error}`));
    }
  }

  private fail(err: Error): void {
    if (this.state === "ended") return;
    this.failure ??= err;
    this.state = "failed";
    this.pending?.reject(this.failure);
    this.pending = undefined;
  }

  private rethrow(): void {
    if (this.failure) throw this.failure;
  }
}
