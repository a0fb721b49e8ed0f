// PID 1 inherits every orphan and must reap it, but Bun reaps the children it
// spawned itself (by pid), so a plain wait() would steal their statuses and
// break exec's exit codes. The reaper therefore only peeks at exited children
// and reaps by pid the ones nobody in the guest spawned.
import { readdirSync, readFileSync } from "node:fs";
import type { Logger } from "../log.ts";
import { peekExited, reapPid } from "./ffi.ts";

export interface WaitApi {
  /** pid of one exited, unreaped child (left unreaped); 0 if none has exited; null if there are no children. */
  peek(): number | null;
  /** Reaps pid if it has exited; false otherwise. */
  reap(pid: number): boolean;
  /** Every child of this process, running or not. */
  children(): number[];
}

/** At most this many reaps per peek loop, so a fork bomb cannot hold the event loop. */
const MAX_PEEKS = 256;

export class Reaper {
  private timer: Timer | undefined;
  private pending = false;
  reaped = 0;

  constructor(
    private readonly api: WaitApi,
    private readonly owns: (pid: number) => boolean,
    private readonly log?: Logger,
  ) {}

  /** Reaps what can be reaped now; returns how many. */
  sweep(): number {
    let n = 0;
    let blocked = false;
    for (let i = 0; i < MAX_PEEKS; i++) {
      const pid = this.api.peek();
      if (pid === null || pid === 0) return this.count(n);
      // waitid returns the oldest exited child; if that one is Bun's (not yet
      // collected by it), orphans behind it are found by pid instead.
      if (this.owns(pid) || !this.api.reap(pid)) {
        blocked = true;
        break;
      }
      n++;
    }
    if (blocked) {
      for (const pid of this.api.children()) {
        if (!this.owns(pid) && this.api.reap(pid)) n++;
      }
    }
    return this.count(n);
  }

  /**
   * Sweeps soon after each SIGCHLD (a signal that comes while a sweep waits
   * is for a child that sweep finds), and every intervalMs as a backstop:
   * a long one, since every wake of an idle box's PID 1 costs (at 250 ms,
   * ~2% of a core under tcg; at 5 s, ~0.7% for the whole idle VM).
   */
  start(intervalMs = 5000): void {
    this.timer = setInterval(() => this.safeSweep(), intervalMs);
    process.on("SIGCHLD", this.onChild);
  }

  stop(): void {
    clearInterval(this.timer);
    process.off("SIGCHLD", this.onChild);
  }

  private readonly onChild = () => {
    if (this.pending) return;
    this.pending = true;
    // Let Bun collect its own child first: the signal is for both.
    setTimeout(() => {
      this.pending = false;
      this.safeSweep();
    }, 10);
  };

  private safeSweep(): void {
    try {
      this.sweep();
    } catch (err) {
      this.log?.warn("reaper failed", { error: (err as Error).message });
    }
  }

  private count(n: number): number {
    if (n > 0) this.log?.debug("reaped orphans", { count: n });
    this.reaped += n;
    return n;
  }
}

/** The real thing: waitid through libc, children from /proc/self/task/<tid>/children (any thread may be a parent). */
export const libcWait: WaitApi = {
  peek: peekExited,
  reap: reapPid,
  children() {
    const pids: number[] = [];
    for (const tid of readdirSync("/proc/self/task")) {
      const text = readFileSync(`/proc/self/task/${tid}/children`, "utf8").trim();
      if (text) for (const p of text.split(/\s+/)) pids.push(Number(p));
    }
    return pids;
  },
};
