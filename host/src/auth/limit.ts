// A token bucket per token for box creation: a client that loops cannot fill
// the server's disk. Every box a remote request makes is counted, whichever
// route made it (a box, a session's new box, a fork, doctor's throwaway boxes,
// a dispatch's workers); the daemon charges it (daemon/creations.ts).
import { HutchError } from "@hutch/shared";

export class CreateLimiter {
  private buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    /** Creations a token may make at once... */
    readonly burst = 20,
    /** ...and how many it gets back per minute. */
    readonly perMinute = 20,
  ) {}

  /**
   * Takes n creations for key, all or none: a request that would make more
   * boxes than are left makes none. Throws `limited` naming when to retry.
   */
  take(key: string, now = Date.now(), n = 1): void {
    if (n > this.burst)
      throw new HutchError(
        "limited",
        `this request would create ${n} boxes; a token may create at most ${this.burst} at once`,
        `ask for ${this.burst} or fewer`,
      );
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 60_000) * this.perMinute);
    b.at = now;
    this.buckets.set(key, b);
    if (b.tokens < n) {
      const wait = Math.ceil(((n - b.tokens) * 60) / this.perMinute);
      throw new HutchError("limited", `too many boxes created with this token (${this.perMinute} a minute)`, `retry in ${wait} s`, {
        retryAfterSeconds: wait,
      });
    }
    b.tokens -= n;
  }
}
