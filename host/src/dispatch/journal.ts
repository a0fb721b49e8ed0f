// A dispatch's journal: $HUTCH_HOME/dispatch/<id>/journal.json, the whole
// state rewritten (temporary name, then rename) at every change, so a daemon
// killed at any point finds each worker's box named before it was made. The
// losers' diffs sit beside it as w<n>.diff.
import { mkdirSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Dispatch, DispatchCreateBody } from "@hutch/shared";

export interface Journal {
  version: 1;
  dispatch: Dispatch;
  body: DispatchCreateBody;
  owner: string;
  /** Boxes the dispatch made and has not deleted yet (workers, graders, an owned base), by name. */
  boxes: string[];
}

export const dispatchDir = (home: string, id?: string) => (id ? join(home, "dispatch", id) : join(home, "dispatch"));

export function writeJournal(home: string, j: Journal): void {
  const dir = dispatchDir(home, j.dispatch.id);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const p = join(dir, "journal.json");
  writeFileSync(`${p}.tmp`, `${JSON.stringify(j, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${p}.tmp`, p);
}

export async function readJournal(home: string, id: string): Promise<Journal | null> {
  const f = Bun.file(join(dispatchDir(home, id), "journal.json"));
  if (!(await f.exists())) return null;
  const j = (await f.json()) as Journal;
  return j.version === 1 ? j : null;
}

export function journalIds(home: string): string[] {
  try {
    return readdirSync(dispatchDir(home)).filter((n) => /^dsp_[0-9a-z]{20}$/.test(n));
  } catch {
    return [];
  }
}
