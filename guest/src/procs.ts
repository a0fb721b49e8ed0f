// Every process the guest starts, so shutdown can stop them all.
// exec children run in their own process group (spawned detached) and PTY
// children lead their own session, so signals go to the group: a shell's
// background jobs stop with it instead of keeping pipes open.
import { constants } from "node:os";

export interface Tracked {
  readonly pid: number;
  readonly exited: Promise<unknown>;
}

const SIGNALS = constants.signals as Record<string, number>;

/** "TERM", "SIGTERM" or "15" → "SIGTERM"; undefined for anything else. */
export function signalName(input: string): NodeJS.Signals | undefined {
  if (/^\d+$/.test(input)) {
    const n = Number(input);
    const found = Object.entries(SIGNALS).find(([, v]) => v === n);
    return found?.[0] as NodeJS.Signals | undefined;
  }
  const name = input.startsWith("SIG") ? input : `SIG${input}`;
  return name in SIGNALS ? (name as NodeJS.Signals) : undefined;
}

/** "SIGTERM" → "TERM", the form exit messages carry. */
export function shortSignal(name: string | number | null): string | null {
  return name === null ? null : String(name).replace(/^SIG/, "");
}

export class ProcessTable {
  private readonly live = new Map<number, Tracked>();

  add(proc: Tracked): void {
    this.live.set(proc.pid, proc);
    void proc.exited.finally(() => this.live.delete(proc.pid));
  }

  get size(): number {
    return this.live.size;
  }

  /** Whether the guest spawned this pid and Bun will reap it (the PID 1 reaper must leave it alone). */
  has(pid: number): boolean {
    return this.live.has(pid);
  }

  /** Signals the process group, falling back to the process if the group is gone. */
  signal(pid: number, sig: NodeJS.Signals): void {
    try {
      process.kill(-pid, sig);
    } catch {
      try {
        process.kill(pid, sig);
      } catch {
        // Already reaped: nothing left to signal.
      }
    }
  }

  /** SIGTERM everything, SIGKILL what is left after graceMs. Resolves once all have exited. */
  async stopAll(graceMs: number): Promise<{ terminated: number; killed: number }> {
    const procs = [...this.live.values()];
    for (const p of procs) this.signal(p.pid, "SIGTERM");
    const allExited = Promise.all(procs.map((p) => p.exited));
    const inTime = await Promise.race([allExited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
    let killed = 0;
    if (!inTime) {
      for (const p of this.live.values()) {
        this.signal(p.pid, "SIGKILL");
        killed++;
      }
      await Promise.race([allExited, Bun.sleep(1000)]);
    }
    return { terminated: procs.length, killed };
  }
}
