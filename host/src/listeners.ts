// A typed list of listeners: how one service tells the others what happened
// (a box changed state, a channel opened, an egress decision) without a
// single hook field that only one subscriber can hold. Listeners run in the
// order they were added. One that throws does not stop the others: `emit`
// logs it; `check` is for vetoes and lets the first refusal through; `settle`
// awaits each in turn and lets the first failure through after all ran.
import { log } from "./log.ts";

const logger = log.create({ service: "listeners" });

export class Listeners<A extends unknown[]> {
  private readonly fns: ((...args: A) => unknown)[] = [];

  constructor(private readonly what: string) {}

  /** Adds a listener; returns what removes it. */
  add(fn: (...args: A) => unknown): () => void {
    this.fns.push(fn);
    return () => {
      const i = this.fns.indexOf(fn);
      if (i >= 0) this.fns.splice(i, 1);
    };
  }

  get size(): number {
    return this.fns.length;
  }

  /** Tells every listener; a failing one is logged and the rest still hear. */
  emit(...args: A): void {
    for (const fn of [...this.fns]) {
      try {
        const r = fn(...args);
        if (r instanceof Promise) r.catch((err) => logger.warn(`a ${this.what} listener failed`, { error: (err as Error).message }));
      } catch (err) {
        logger.warn(`a ${this.what} listener failed`, { error: (err as Error).message });
      }
    }
  }

  /** Asks every listener in turn; the first that throws refuses (a veto, e.g. a policy check). */
  check(...args: A): void {
    for (const fn of [...this.fns]) fn(...args);
  }

  /** Awaits every listener in turn; all run, and the first failure is thrown afterwards. */
  async settle(...args: A): Promise<void> {
    let first: unknown;
    for (const fn of [...this.fns]) {
      try {
        await fn(...args);
      } catch (err) {
        first ??= err;
      }
    }
    if (first !== undefined) throw first;
  }
}
