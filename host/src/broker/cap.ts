// A per-box cap on the connections the relay holds open to the box's gate.
// Each one costs the daemon two fds (the relay's socket and the gate's) and
// more once it reaches an upstream; the fds are the daemon's, shared by every
// box, so one box must not be able to take them all. A connection beyond the
// cap is answered by the relay itself and never reaches the gate. Refusals
// reach the egress log (and every open session of the box) at most once per
// interval, as one record that counts them: a flooding box must not flood the
// log it is judged by.

/** Connections one box may hold open through the broker. */
export const MAX_BOX_CONNS = 256;
/** At most one egress record of refusals per box per this long. */
export const REFUSAL_RECORD_MS = 1_000;

/** The clock and timer the cap uses (tests drive their own). */
export interface CapClock {
  now(): number;
  after(ms: number, fn: () => void): { cancel(): void };
}

export const systemClock: CapClock = {
  now: () => performance.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  },
};

export class ConnCap {
  private openNow = 0;
  /** Refused since the last record. */
  private pending = 0;
  private lastRecord = -Infinity;
  private flush?: { cancel(): void };

  constructor(
    readonly max: number,
    /** Writes one egress record of `refused` refusals (the first of a burst at once, the rest at most once per interval). */
    private readonly report: (refused: number) => void,
    private readonly clock: CapClock = systemClock,
    private readonly intervalMs = REFUSAL_RECORD_MS,
  ) {}

  get open(): number {
    return this.openNow;
  }

  /** True when one more connection may open; it counts until release(). False is a refusal, counted for the log. */
  admit(): boolean {
    if (this.openNow < this.max) {
      this.openNow++;
      return true;
    }
    this.pending++;
    const wait = this.lastRecord + this.intervalMs - this.clock.now();
    if (wait <= 0) this.record();
    else this.flush ??= this.clock.after(wait, () => this.record());
    return false;
  }

  /** One admitted connection closed. Idempotence is the caller's: call it once per true admit(). */
  release(): void {
    if (this.openNow > 0) this.openNow--;
  }

  /** The box detached: refusals not yet recorded are recorded now. */
  close(): void {
    this.record();
  }

  private record(): void {
    this.flush?.cancel();
    this.flush = undefined;
    const n = this.pending;
    if (n === 0) return;
    this.pending = 0;
    this.lastRecord = this.clock.now();
    this.report(n);
  }
}
