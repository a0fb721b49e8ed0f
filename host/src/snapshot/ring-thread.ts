// A second core for a save or a restore: the calling thread hands jobs, each
// with its bytes, to a worker through a shared ring, so it copies each job's
// bytes once and reuses its own buffers at once, and memory is bounded by the
// ring whatever the worker's pace: a full ring makes the caller wait. A job
// too large for the ring crosses on its own, transferred. One operation, one
// worker, ended by flush() or discard(). A save seals in one (seal-worker.ts),
// a restore creates its small files in one (write-worker.ts).
//
// The caller runs long stretches of synchronous file system calls and yields
// to the event loop only once a slice (turns.ts), so what it must know at
// once is in shared memory, not in messages: that the worker is ready, and
// how much of the ring it has
// handed back (with Atomics.wait to sleep on while the ring is full). What the
// worker reports per batch comes as messages, taken whenever the caller yields.

import { yieldNow } from "./turns.ts";

/** Jobs are handed over in batches of about this many bytes, or this many jobs. */
const BATCH_BYTES = 256 * 1024;
const BATCH_JOBS = 128;

/** A job's bytes: at [off, off + len) of the ring, or in `bytes` when too large for it. */
export interface Placed {
  off: number;
  len: number;
  bytes?: Uint8Array;
}

export type ToWorker<I, J> =
  /** `control`: Int32 [ready, batches done], then a BigInt64 of the ring position done to. */
  | { t: "init"; init: I; ring: SharedArrayBuffer; control: SharedArrayBuffer }
  /** `end`: the ring position after the batch's last job, handed back once the worker holds no view of it. */
  | { t: "jobs"; jobs: (J & Placed)[]; end: number }
  | { t: "flush" }
  | { t: "discard" };

export type FromWorker<D, F> =
  | { t: "ready" }
  | { t: "done"; end: number; result: D }
  | { t: "flushed"; result: F }
  | { t: "discarded" }
  | { t: "failed"; error: string };

/** How long a worker may take to start before the caller says it works on one thread. */
const START_MS = 5000;
let warned = false;

/** The worker entries, each an entry point of the compiled binary (scripts/compile.ts, HOST_WORKERS). */
export type WorkerEntry = "seal-worker.ts" | "write-worker.ts";

/**
 * Where a worker's entry is. Run from source, beside this file; in the
 * compiled binary, the entry point named by its path from the build's root
 * (host/src).
 */
function workerUrl(entry: WorkerEntry): string {
  return import.meta.url.includes("/$bunfs/") ? `./snapshot/${entry}` : new URL(`./${entry}`, import.meta.url).href;
}

export class RingThread<I, J, D, F> {
  private readonly worker: Worker;
  private readonly ring: SharedArrayBuffer;
  private readonly view: Uint8Array;
  /** Shared with the worker: [0] 1 once it is ready, [1] a count of batches done (to wait on); bytes 8..16 the tail. */
  private readonly control = new SharedArrayBuffer(16);
  private readonly flags = new Int32Array(this.control, 0, 2);
  private readonly doneTo = new BigInt64Array(this.control, 8, 1);
  /** Batches done when the caller last yielded to take the worker's messages. */
  private taken = 0;
  /** Ring bytes handed out, as a running total; [tail, head) is in use, the tail being what the worker has handed back. */
  private head = 0;
  private batch: (J & Placed)[] = [];
  private batchBytes = 0;
  private pending: { resolve: (result: F | undefined) => void; reject: (err: Error) => void } | undefined;
  private failure: Error | undefined;
  private state: "starting" | "ready" | "failed" | "ended" = "starting";
  private readonly created = performance.now();
  /** Jobs handed over so far. */
  sent = 0;

  /**
   * @param what names the worker in errors ("the seal worker")
   * @param onDone called with what the worker reports for each batch, as the caller yields
   */
  constructor(
    entry: WorkerEntry,
    private readonly what: string,
    init: I,
    private readonly ringBytes: number,
    private readonly onDone: (result: D) => void,
  ) {
    this.ring = new SharedArrayBuffer(ringBytes);
    this.view = new Uint8Array(this.ring);
    this.worker = new Worker(workerUrl(entry));
    this.worker.unref();
    this.worker.onmessage = (e: MessageEvent<FromWorker<D, F>>) => this.receive(e.data);
    this.worker.onerror = (e) => this.fail(new Error(`${what} failed: ${e.message}`));
    this.post({ t: "init", init, ring: this.ring, control: this.control });
  }

  /** True once the worker has started; before that, and if it never does, the caller does the work itself. */
  get ready(): boolean {
    if (this.state === "starting" && Atomics.load(this.flags, 0) === 1) this.state = "ready";
    return this.state === "ready";
  }

  /**
   * Whether to hand the next job to the worker: once it is ready, and after it
   * failed having been handed jobs (send() then throws that failure). Before it
   * is ready, or if it never starts, the caller does the work itself; a worker
   * that failed to load or has not started in START_MS is reported once, where
   * a broken build would otherwise only be slow (an entry that cannot be found
   * may neither start nor fail).
   */
  get usable(): boolean {
    if (this.ready || (this.failure && this.sent > 0)) return true;
    const why =
      this.failure?.message ??
      (performance.now() - this.created > START_MS ? `${this.what} did not start in ${START_MS / 1000} s` : undefined);
    if (why && !warned) {
      warned = true;
      process.emitWarning(`working on one thread: ${why}`);
    }
    return false;
  }

  /** Queues one job; waits while the ring is full. The caller may reuse `bytes` once this resolves. One call at a time. */
  async send(job: J, bytes: Uint8Array): Promise<void> {
    this.rethrow();
    this.sent++;
    const len = bytes.length;
    if (len > this.ringBytes / 2) return this.sendAlone(job, bytes);
    for (;;) {
      const seen = Atomics.load(this.flags, 1);
      const tail = Number(Atomics.load(this.doneTo, 0));
      const pos = this.head % this.ringBytes;
      // A job's bytes never wrap: bytes that do not fit before the ring's end start at its beginning.
      const start = pos + len > this.ringBytes ? this.head + this.ringBytes - pos : this.head;
      if (start + len - tail <= this.ringBytes) {
        const off = start % this.ringBytes;
        this.view.set(bytes, off);
        this.head = start + len;
        this.batch.push({ ...job, off, len });
        this.batchBytes += len;
        if (this.batchBytes >= BATCH_BYTES || this.batch.length >= BATCH_JOBS) this.postBatch();
        // The worker did more: yield, so its reports are taken as they come, not all at the end.
        if (seen !== this.taken) {
          this.taken = seen;
          await yieldNow();
        }
        return;
      }
      await this.waitForWorker(seen);
    }
  }

  /**
   * A job too large for the ring crosses on its own, transferred, once the
   * ring is empty, and takes the whole ring's worth of the count while it is
   * worked on: one such job in flight at a time, nothing beside it.
   */
  private async sendAlone(job: J, plain: Uint8Array): Promise<void> {
    for (;;) {
      const seen = Atomics.load(this.flags, 1);
      if (Number(Atomics.load(this.doneTo, 0)) >= this.head) break;
      await this.waitForWorker(seen);
    }
    const bytes = plain.slice();
    this.head += this.ringBytes;
    this.post({ t: "jobs", jobs: [{ ...job, off: 0, len: plain.length, bytes }], end: this.head }, [bytes.buffer as ArrayBuffer]);
  }

  /** Hands over what is batched and sleeps until the worker finishes a batch; now and then yields instead, so a message saying it failed gets in. */
  private async waitForWorker(seen: number): Promise<void> {
    this.postBatch();
    if (Atomics.wait(this.flags, 1, seen, 100) === "timed-out") await yieldNow();
    this.rethrow();
  }

  /** Does what is queued and finishes; returns the worker's last report, or undefined when it was handed nothing. The worker ends. */
  async flush(): Promise<F | undefined> {
    if (this.sent === 0) {
      this.end();
      return undefined;
    }
    this.rethrow();
    this.postBatch();
    const result = await new Promise<F | undefined>((resolve, reject) => {
      this.pending = { resolve, reject };
      this.post({ t: "flush" });
    });
    this.end();
    return result;
  }

  /** Drops what is queued, and what the worker holds; the worker ends. */
  async discard(): Promise<void> {
    if (this.sent > 0 && (this.state === "ready" || this.state === "starting")) {
      this.batch = [];
      await new Promise<unknown>((resolve) => {
        this.pending = { resolve, reject: resolve };
        this.post({ t: "discard" });
      });
    }
    this.end();
  }

  private end(): void {
    if (this.state !== "failed") this.state = "ended";
    this.worker.terminate();
  }

  private postBatch(): void {
    if (this.batch.length === 0) return;
    this.post({ t: "jobs", jobs: this.batch, end: this.head });
    this.batch = [];
    this.batchBytes = 0;
  }

  private post(m: ToWorker<I, J>, transfer: ArrayBuffer[] = []): void {
    this.worker.postMessage(m, transfer);
  }

  private receive(m: FromWorker<D, F>): void {
    if (m.t === "ready") {
      if (this.state === "starting") this.state = "ready";
    } else if (m.t === "done") {
      this.onDone(m.result);
    } else if (m.t === "flushed") {
      this.pending?.resolve(m.result);
      this.pending = undefined;
    } else if (m.t === "discarded") {
      this.pending?.resolve(undefined);
      this.pending = undefined;
    } else {
      this.fail(new Error(`${this.what} failed: ${m.error}`));
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

export interface RingServer<I, J, D, F> {
  init(init: I): void;
  /** Does a batch; `bytes` is a job's view of the ring (or its own bytes), valid only until this returns. */
  jobs(jobs: (J & Placed)[], bytes: (job: Placed) => Uint8Array): D;
  flush(): F;
  discard(): void;
}

/** The worker's side: runs `server` on this worker's messages. */
export function serveRing<I, J, D, F>(server: RingServer<I, J, D, F>): void {
  const self = globalThis as unknown as Worker;
  let ring: SharedArrayBuffer | undefined;
  let flags: Int32Array | undefined;
  let doneTo: BigInt64Array | undefined;
  const post = (m: FromWorker<D, F>) => self.postMessage(m);
  const bytes = (j: Placed) => j.bytes ?? new Uint8Array(ring!, j.off, j.len);
  let failed: string | undefined;
  self.onmessage = (e: MessageEvent<ToWorker<I, J>>) => {
    const m = e.data;
    // After a failure nothing more is done: the caller is told again, and gives up.
    if (failed !== undefined) return post({ t: "failed", error: failed });
    try {
      if (m.t === "init") {
        server.init(m.init);
        ring = m.ring;
        flags = new Int32Array(m.control, 0, 2);
        doneTo = new BigInt64Array(m.control, 8, 1);
        Atomics.store(flags, 0, 1);
        post({ t: "ready" });
      } else if (m.t === "jobs") {
        const result = server.jobs(m.jobs, bytes);
        // Hand the batch's ring space back, then wake a caller that waits for it.
        Atomics.store(doneTo!, 0, BigInt(m.end));
        Atomics.add(flags!, 1, 1);
        Atomics.notify(flags!, 1);
        post({ t: "done", end: m.end, result });
      } else if (m.t === "flush") {
        post({ t: "flushed", result: server.flush() });
      } else {
        server.discard();
        post({ t: "discarded" });
      }
    } catch (err) {
      failed = (err as Error)?.message ?? String(err);
      server.discard();
      post({ t: "failed", error: failed });
    }
  };
}
