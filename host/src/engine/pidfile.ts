// A box process is identified by pid AND its start time (field 22 of
// /proc/<pid>/stat), so a recycled pid is never mistaken for the box.
import { readFileSync, readdirSync } from "node:fs";

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
