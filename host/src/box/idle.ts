// Boxes that sleep by themselves. The hard part is knowing a box is idle: the
// daemon's activity points (a tool stream, a log subscriber, a headless turn)
// each hold the box while they last, and a box with no hold for --sleep-after
// is put to sleep. A hold of kind "client" (an attached terminal, an IDE log
// view, a browser or desktop client) means never: not for --sleep-after and
// not for --max-awake. Time is injected so tests need not wait.
import { HutchError, parseDuration } from "@hutch/shared";
import { log } from "../log.ts";

const logger = log.create({ service: "idle" });

/** What keeps a box awake. A client keeps it awake whatever its limits say. */
export type Activity = "client" | "exec" | "turn" | "forward";

export interface AutoSleep {
  /** Sleep after this long with nothing holding the box; null: never. */
  sleepAfterMs: number | null;
  /** Sleep after this long awake, busy or not (but never with a client attached); null: no limit. */
  maxAwakeMs: number | null;
}

export interface IdleDeps {
  now(): number;
  /** The box's limits, or null when it has none (or is gone). */
  settings(boxId: string): AutoSleep | null;
  /** Puts the box to sleep. */
  sleep(boxId: string, why: string): Promise<unknown>;
}

interface Awake {
  since: number;
  /** When the last hold was released (or the box woke). */
  quietSince: number;
  holds: Record<Activity, number>;
  sleeping: boolean;
}

const CHECK_MS = 1000;
const zero = (): Record<Activity, number> => ({ client: 0, exec: 0, turn: 0, forward: 0 });

/** A --sleep-after or --max-awake value: a duration (5s, 30m, 2h), or off / 0 for never. */
export function parseAutoSleep(flag: string, text: string): number | null {
  const s = text.trim().toLowerCase();
  if (s === "off" || s === "never" || s === "0") return null;
  const ms = parseDuration(s);
  if (ms === null || ms < 1000 || ms > 30 * 86_400_000)
    throw new HutchError("invalid", `${flag} "${text}": expected a duration from 1s to 30d (5s, 30m, 2h), or off`, `e.g. ${flag} 30m`);
  return ms;
}

export class IdleTracker {
  private readonly boxes = new Map<string, Awake>();
  private timer?: ReturnType<typeof setInterval>;

  constructor(private readonly d: IdleDeps) {}

  /** The box is running from now. */
  awake(boxId: string): void {
    const now = this.d.now();
    const had = this.boxes.get(boxId);
    if (had?.sleeping === false) return;
    if (!had) return void this.boxes.set(boxId, { since: now, quietSince: now, holds: zero(), sleeping: false });
    // Holds taken while it woke stay counted (their releases refer to this record).
    had.since = now;
    had.quietSince = now;
    had.sleeping = false;
  }

  /** The box stopped, slept or went: nothing to watch until it runs again. */
  gone(boxId: string): void {
    const b = this.boxes.get(boxId);
    // Holds still open (a client whose stream outlives the box) are kept so their release balances.
    if (b && Object.values(b.holds).some((n) => n > 0)) b.sleeping = true;
    else this.boxes.delete(boxId);
  }

  /** An activity begins on the box; the function returned ends it (once, however often it is called). */
  hold(boxId: string, kind: Activity): () => void {
    const b = this.boxes.get(boxId) ?? this.placeholder(boxId);
    b.holds[kind]++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      b.holds[kind]--;
      b.quietSince = this.d.now();
    };
  }

  /** Whether nothing holds the box now. */
  quiet(boxId: string): boolean {
    const b = this.boxes.get(boxId);
    return !b || Object.values(b.holds).every((n) => n === 0);
  }

  /** What holds the box now, by kind (for box info and tests). */
  holds(boxId: string): Record<Activity, number> {
    return { ...(this.boxes.get(boxId)?.holds ?? zero()) };
  }

  start(): void {
    this.timer = setInterval(() => void this.check(), CHECK_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One look: every awake box past its limit is put to sleep. */
  async check(): Promise<void> {
    const now = this.d.now();
    const due: [string, string][] = [];
    for (const [id, b] of this.boxes) {
      if (b.sleeping || b.holds.client > 0) continue;
      const limits = this.d.settings(id);
      if (!limits) continue;
      const busy = Object.values(b.holds).some((n) => n > 0);
      if (limits.sleepAfterMs !== null && !busy && now - b.quietSince >= limits.sleepAfterMs)
        due.push([id, `idle for ${Math.round((now - b.quietSince) / 1000)}s (--sleep-after ${limits.sleepAfterMs / 1000}s)`]);
      else if (limits.maxAwakeMs !== null && now - b.since >= limits.maxAwakeMs)
        due.push([id, `awake for ${Math.round((now - b.since) / 1000)}s (--max-awake ${limits.maxAwakeMs / 1000}s)`]);
    }
    await Promise.all(
      due.map(async ([id, why]) => {
        const b = this.boxes.get(id)!;
        b.sleeping = true;
        logger.info("putting an idle box to sleep", { box: id, why });
        try {
          await this.d.sleep(id, why);
        } catch (err) {
          // Still awake: look again from now rather than retry every second.
          b.sleeping = false;
          b.quietSince = this.d.now();
          b.since = this.d.now();
          logger.warn("could not put an idle box to sleep", { box: id, err: String(err) });
        }
      }),
    );
  }

  /** A hold on a box not known to be awake (it is waking): counted, and kept when it wakes. */
  private placeholder(boxId: string): Awake {
    const now = this.d.now();
    const b: Awake = { since: now, quietSince: now, holds: zero(), sleeping: true };
    this.boxes.set(boxId, b);
    return b;
  }
}
