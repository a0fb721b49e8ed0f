// A token bucket per token for box creation (POST /v1/boxes): a client that
// loops cannot fill the server's disk. Nothing else is counted.
import { HutchError } from "@hutch/shared";

export class CreateLimiter {
  private buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    /** Creations a token may make at once... */
    private readonly burst = 20,
    /** ...and how many it gets back per minute. */
    private readonly perMinute = 20,
  ) {}

  /** Takes one creation for key, or throws a conflict naming when to retry. */
  take(key: string, now = Date.now()): void {
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 60_000) * this.perMinute);
    b.at = now;
    if (b.tokens < 1) {
      this.buckets.set(key, b);
      const wait = Math.ceil(((1 - b.tokens) * 60) / this.perMinute);
      throw new HutchError("limited", `too many boxes created with this token (${this.perMinute} a minute)`, `retry in ${wait} s`, {
        retryAfterSeconds: wait,
      });
    }
    b.tokens -= 1;
    this.buckets.set(key, b);
  }
}
