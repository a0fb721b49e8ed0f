// The journal of one offload, kept in the repository's git dir
// (`.git/hutch/<box>.json`): written before anything reaches the box, marked
// done only once the box's copy is complete. A rerun reads it to resume or
// redo; bring-back reads it for the offload's base, index and work tree
// (also held by refs under refs/hutch/<box>/offload/, so gc never takes them).
import { mkdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import type { OffloadRecordFile } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";

/** The record is the file the extension reads: its shape is shared's. */
export type { OffloadBaseline as Baseline, OffloadRecordFile as OffloadRecord } from "@hutch/shared";

export const recordPath = (gitDir: string, box: string) => join(gitDir, "hutch", `${box}.json`);
export const offloadRef = (box: string, what: "base" | "index" | "work" | "ignored") => `refs/hutch/${box}/offload/${what}`;
export const quarantineRef = (box: string, what: "head" | "index" | "work") => `refs/hutch/${box}/${what}`;

export async function readRecord(gitDir: string, box: string): Promise<OffloadRecordFile | null> {
  const f = Bun.file(recordPath(gitDir, box));
  if (!(await f.exists())) return null;
  try {
    const r = (await f.json()) as OffloadRecordFile;
    if (r.version !== 1 || typeof r.base !== "string") throw new Error("unknown version");
    return r;
  } catch (err) {
    throw new HutchError(
      "config",
      `${recordPath(gitDir, box)} is not an offload record: ${(err as Error).message}`,
      "move it aside and rerun the offload",
    );
  }
}

/** Written whole to a temporary name and renamed, so a kill leaves the old record or the new one. */
export async function writeRecord(gitDir: string, r: OffloadRecordFile): Promise<void> {
  const p = recordPath(gitDir, r.box);
  mkdirSync(join(gitDir, "hutch"), { recursive: true });
  await Bun.write(`${p}.tmp`, `${JSON.stringify(r, null, 2)}\n`);
  renameSync(`${p}.tmp`, p);
}
