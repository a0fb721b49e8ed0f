// A box process is identified by pid AND its start time (field 22 of
// /proc/<pid>/stat), so a recycled pid is never mistaken for the box.
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";

export interface ProcIdentity {
  pid: number;
  startTime: string;
}

export function procStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // comm (field 2) may contain spaces and parens: split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

export function isAlive(id: ProcIdentity): boolean {
  const st = procStartTime(id.pid);
  if (st === null || st !== id.startTime) return false;
  // A zombie still has a stat entry; it is not running.
  try {
    const state = readFileSync(`/proc/${id.pid}/stat`, "utf8");
    return state.slice(state.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Pids whose environment names this box (HUTCH_BOX_ID=<id>): the box's processes, wherever they are. */
export function pidsOfBox(boxId: string): number[] {
  const needle = `HUTCH_BOX_ID=${boxId}\0`;
  const out: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/environ`, "latin1").includes(needle)) out.push(Number(e));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** A pidfile's {pid, startTime}, or null when missing or malformed. */
export function readIdentity(path: string): ProcIdentity | null {
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as ProcIdentity;
    return typeof parsed.pid === "number" && typeof parsed.startTime === "string" ? parsed : null;
  } catch {
    return null;
  }
}

export async function waitGone(id: ProcIdentity, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!isAlive(id)) return true;
    await Bun.sleep(20);
  }
  return !isAlive(id);
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // gone already
  }
}

/**
 * Kills a box's main process (and the pids given with it), waits for it,
 * then kills anything else still carrying the box's id, and removes the pidfile.
 */
export async function killBox(
  boxId: string,
  id: ProcIdentity | null,
  pidfile: string,
  first: number[] = [],
  /** Also every process of the host carrying the box's id (false: only the pidfile's and `first`). */
  sweep = true,
): Promise<void> {
  if (id && isAlive(id)) {
    for (const pid of first) killQuietly(pid);
    killQuietly(id.pid);
    await waitGone(id, 5000);
  }
  // SIGKILL is not instant: a process on a busy host can still be exiting when kill(2)
  // returns. Wait for the box's processes to be gone, so "left behind" means left behind.
  const deadline = sweep ? Date.now() + 5000 : 0;
  for (let left = pidsOfBox(boxId); left.length > 0 && Date.now() < deadline; left = pidsOfBox(boxId)) {
    for (const pid of left) killQuietly(pid);
    await Bun.sleep(20);
  }
  rmSync(pidfile, { force: true });
}

/** What of a box is left on this host: its directory, its processes. Empty means gone. */
export function boxLeftovers(boxId: string, dir: string): string[] {
  const left: string[] = [];
  if (existsSync(dir)) left.push(`directory ${dir}`);
  for (const pid of pidsOfBox(boxId)) left.push(`process ${pid}`);
  return left;
}
