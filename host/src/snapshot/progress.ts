// Progress of long operations, for a callback: counts, rate and ETA, at most
// every intervalMs and once at the end. Plain JSON values, so a CLI's --json
// can print each as one NDJSON line.

export type Operation = "snapshot" | "restore" | "prune" | "check";

export interface Progress {
  op: Operation;
  /** What the operation is doing: "scan", "save", "restore", "mark", "delete", "read", "done". */
  phase: string;
  files: number;
  /** Known from a scan or the parent snapshot; absent when not. */
  filesTotal?: number;
  bytes: number;
  bytesTotal?: number;
  /** Bytes added to the store so far (snapshot, prune's repack). */
  bytesNew?: number;
  /** Bytes per second since the start. */
  rate: number;
  /** Remaining time at the current rate, when the totals are known. */
  etaMs?: number;
  elapsedMs: number;
  done: boolean;
}

export type ProgressFn = (p: Progress) => void;

export class Meter {
  files = 0;
  bytes = 0;
  bytesNew = 0;
  filesTotal?: number;
  bytesTotal?: number;
  phase = "start";
  private readonly t0 = performance.now();
  private last = 0;

  constructor(
    private readonly op: Operation,
    private readonly fn?: ProgressFn,
    private readonly intervalMs = 250,
  ) {}

  get enabled(): boolean {
    return this.fn !== undefined;
  }

  /** Reports if intervalMs has passed since the last report. */
  tick(): void {
    if (!this.fn) return;
    const now = performance.now();
    if (now - this.last < this.intervalMs) return;
    this.last = now;
    this.fn(this.snapshot(now, false));
  }

  /** The last report, always sent. */
  finish(): void {
    if (!this.fn) return;
    this.phase = "done";
    this.fn(this.snapshot(performance.now(), true));
  }

  private snapshot(now: number, done: boolean): Progress {
    const elapsedMs = Math.round(now - this.t0);
    const rate = elapsedMs > 0 ? Math.round((this.bytes * 1000) / elapsedMs) : 0;
    const p: Progress = { op: this.op, phase: this.phase, files: this.files, bytes: this.bytes, rate, elapsedMs, done };
    if (this.filesTotal !== undefined) p.filesTotal = Math.max(this.filesTotal, this.files);
    if (this.bytesTotal !== undefined) p.bytesTotal = Math.max(this.bytesTotal, this.bytes);
    if (this.op === "snapshot" || this.op === "prune") p.bytesNew = this.bytesNew;
    if (done) p.etaMs = 0;
    else if (this.bytesTotal !== undefined && this.bytesTotal > 0 && this.bytes > 0) {
      p.etaMs = Math.round(Math.max(0, this.bytesTotal - this.bytes) * (elapsedMs / this.bytes));
    } else if (this.filesTotal !== undefined && this.filesTotal > 0 && this.files > 0) {
      p.etaMs = Math.round(Math.max(0, this.filesTotal - this.files) * (elapsedMs / this.files));
    }
    return p;
  }
}
