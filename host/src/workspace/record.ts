// The journal of one offload, kept in the repository's git dir
// (`.git/hutch/<box>.json`): written before anything reaches the box, marked
// done only once the box's copy is complete. A rerun reads it to resume or
// redo; bring-back reads it for the offload's base, index and work tree
// (also held by refs under refs/hutch/<box>/offload/, so gc never takes them).
import { mkdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared/base";

/** What a box's copy was after an offload (or after its work last came home): what an update starts from. */
export interface Baseline {
  id: string;
  base: string;
  boxHead?: string;
  indexTree: string;
  workTree: string;
  /** The offload's work commit then: the box holds it, so an update leaves its objects out. */
  work: string;
  /** The git-ignored files carried then: their tree, and the commit of it the box holds. */
  ignoredTree?: string;
  ignored?: string;
}

export interface OffloadRecord {
  version: 1;
  /** This attempt's id; the box's copy carries it (.git/hutch-offload-id) once complete. */
  id: string;
  box: string;
  /** The repository in the box. */
  guestDir: string;
  branch: string;
  /** The local commit the work was offloaded from, or the box's HEAD after a fast-forward brought it home. */
  base: string;
  /** The box's HEAD when its work last came home (bring-back exports what follows it); the base until then. */
  boxHead?: string;
  /** The baseline trees: what was offloaded, then what the box had when its work last came home. */
  indexTree: string;
  workTree: string;
  heldBack: string[];
  /** The --include paths, so bring-back sees the work tree the same way. */
  include: string[];
  /** The --include-ignored patterns (with the repository's hutch.includeIgnored), and the tree of the files they carried. */
  includeIgnored?: string[];
  ignoredTree?: string;
  state: "sending" | "done";
  at: string;
  /** Set while a second offload updates the box's copy: the copy it started from (a rerun checks the box against it). */
  from?: Baseline;
}

export const recordPath = (gitDir: string, box: string) => join(gitDir, "hutch", `${box}.json`);
export const offloadRef = (box: string, what: "base" | "index" | "work" | "ignored") => `refs/hutch/${box}/offload/${what}`;
export const quarantineRef = (box: string, what: "head" | "index" | "work") => `refs/hutch/${box}/${what}`;

export async function readRecord(gitDir: string, box: string): Promise<OffloadRecord | null> {
  const f = Bun.file(recordPath(gitDir, box));
  if (!(await f.exists())) return null;
  try {
    const r = (await f.json()) as OffloadRecord;
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
export async function writeRecord(gitDir: string, r: OffloadRecord): Promise<void> {
  const p = recordPath(gitDir, r.box);
  mkdirSync(join(gitDir, "hutch"), { recursive: true });
  await Bun.write(`${p}.tmp`, `${JSON.stringify(r, null, 2)}\n`);
  renameSync(`${p}.tmp`, p);
}
