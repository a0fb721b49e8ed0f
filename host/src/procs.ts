// Files named after the process that owns them: staging a killed build left,
// a killed daemon's sleep receiver, a carry's private directory, a snapshot
// lock. Whether that process still runs decides whether its files may go.
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

/** Whether a process runs; one of another user's counts (the signal is refused, EPERM). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException)?.code === "EPERM";
  }
}

/**
 * Removes the directories in `parent` named `<prefix><pid>-…` whose process
 * is gone (killed before it could remove its own); a live one's stay, and so
 * does this process's. Returns the names removed.
 */
export function sweepPidDirs(parent: string, prefix: string): string[] {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(/^(\d+)-/.exec(name.slice(prefix.length))?.[1] ?? Number.NaN);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || processAlive(pid)) continue;
    rmSync(join(parent, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** A new directory `<prefix><this pid>-<random>` in `parent` (made 0700 if missing), after sweeping the gone ones' (sweepPidDirs). */
export function pidDir(parent: string, prefix: string): string {
  mkdirSync(parent, { recursive: true, mode: 0o700 });
  sweepPidDirs(parent, prefix);
  return mkdtempSync(join(parent, `${prefix}${process.pid}-`));
}
