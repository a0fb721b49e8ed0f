// How offload and bring-back read in the editor, with no VS Code API so it
// is tested as data: the dry-run list shown before an offload goes, a
// record's state in the sidebar, and what a bring-back says it did.
import type { BringBackOutput, OffloadOutput, OffloadRecordFile } from "@hutch/shared";
import { count } from "@hutch/shared/text";

export type PlanRow =
  | { kind: "go"; label: string; description: string }
  | { kind: "separator"; label: string }
  | { kind: "file" | "held" | "note"; label: string; description: string };

export function size(n: number): string {
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`;
}

/** The confirm row first, then what goes, what is held back (with how to carry it), and the notes. */
export function planRows(p: OffloadOutput, target: string): PlanRow[] {
  const rows: PlanRow[] = [
    {
      kind: "go",
      label: `Offload ${count(p.files.length, "file")} (${size(p.bytes)}) to box ${p.box}`,
      description: `${p.branch} at ${p.base.slice(0, 12)} → ${target}:${p.guestDir}`,
    },
  ];
  if (p.files.length) rows.push({ kind: "separator", label: `goes (${p.files.length})` });
  for (const f of p.files) rows.push({ kind: "file", label: f.path, description: size(f.bytes) });
  if (p.heldBack.length) rows.push({ kind: "separator", label: `held back (${p.heldBack.length})` });
  for (const h of p.heldBack) rows.push({ kind: "held", label: h.path, description: `${h.rule}; to carry it: !${h.path} in .hutchignore` });
  if (p.notes.length) rows.push({ kind: "separator", label: "notes" });
  for (const n of p.notes) rows.push({ kind: "note", label: n, description: "" });
  return rows;
}

export type WorkspaceState = "sending" | "offloaded" | "brought back";

/** `sending` until the box's copy is complete; `brought back` once its work came home (or the last bring-back said so). */
export function recordState(r: OffloadRecordFile, lastBack?: BringBackOutput): WorkspaceState {
  if (r.state === "sending") return "sending";
  if (r.boxHead !== undefined) return "brought back";
  if (lastBack && lastBack.box === r.box && !lastBack.dryRun && lastBack.case === "branch") return "brought back";
  return "offloaded";
}

const SAID: Record<BringBackOutput["case"], string> = {
  nothing: "nothing to bring back: the box's work is what was sent",
  "fast-forward": "fast-forward: the box's commits and its staged and unstaged changes are in your work tree",
  merge: "merged, uncommitted: the box's changes are in your work tree, HEAD and the index are unchanged",
  branch: "kept apart on a branch: your work tree and index are untouched",
};

/** The message after a bring-back: the case, what came, and for a branch its name and the commands to merge it. */
export function caseMessage(r: BringBackOutput): string {
  const parts = [`brought back from box ${r.box}: ${SAID[r.case]}`];
  if (r.reason) parts.push(`(${r.reason})`);
  if (r.case !== "nothing") parts.push(`${count(r.files.length, "file")}, ${count(r.commits.length, "commit")}.`);
  if (r.case === "branch" && r.created) parts.push(`Branch ${r.created}. Review and merge it: ${(r.commands ?? []).join("; ")}`);
  return parts.join(" ");
}
