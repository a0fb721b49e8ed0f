// The editor's folder and a box: when `hutch offload` handed the folder's
// repository to a box this daemon has, an editor's new session works there
// (the box's agent is already in the offloaded repository, ../harness/handover.ts),
// and paths in the box's repository are shown as the folder's own.
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import type { DaemonClient } from "../client/daemon.ts";
import { findBox } from "../workspace/box.ts";
import { git } from "../workspace/git.ts";
import { readRecord } from "../workspace/record.ts";
import { pathMapper } from "@hutch/shared";

export interface Offloaded {
  box: string;
  /** A path in the box's copy of the repository as the same path in the editor's, else null. */
  localPath(boxPath: string): string | null;
}

/**
 * The newest completed offload of cwd's repository whose box this daemon
 * has (only `box` when named), or null: not in a repository, never offloaded,
 * or its box gone or on another daemon.
 */
export async function offloadedBox(d: DaemonClient, cwd: string, box?: string): Promise<Offloaded | null> {
  const top = await git(cwd, ["rev-parse", "--show-toplevel", "--absolute-git-dir"], { ok: [128] }).catch(() => null);
  if (top?.code !== 0) return null;
  const [root, gitDir] = top.stdout.trim().split("\n") as [string, string | undefined];
  if (!gitDir) return null;
  const names = await readdir(join(gitDir, "hutch")).catch(() => [] as string[]);
  const records = [];
  for (const n of names.filter((x) => x.endsWith(".json"))) {
    const r = await readRecord(gitDir, n.slice(0, -".json".length)).catch(() => null);
    if (r?.state === "done" && (!box || r.box === box)) records.push(r);
  }
  for (const r of records.sort((a, b) => b.at.localeCompare(a.at))) {
    if (await findBox(d, r.box).catch(() => null)) return { box: r.box, localPath: pathMapper(r.guestDir, root) };
  }
  return null;
}
