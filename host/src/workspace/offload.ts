// `hutch offload`: the work tree as it is (commits, the index, unstaged and
// untracked-not-ignored files, minus what is held back) into a box, as one
// git bundle the box's own git unpacks. The index and the work tree travel as
// two commits (index on the base, work tree on the index), so the box gets
// back the exact staged/unstaged split: HEAD at the base, the index from the
// first, the files from the second. The box's copy is assembled in a staging
// directory and renamed into place last, so it is complete or absent.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { HutchError } from "@hutch/shared/base";
import type { DaemonClient } from "../client/daemon.ts";
import { runningBox, sendDir, sh } from "./box.ts";
import { type CarriedConversation, carryConversations, checkNote, wouldCarry } from "./conversation/index.ts";
import { commitTree, findRepo, git, out, type Repo, zsplit } from "./git.ts";
import { type OffloadRecord, offloadRef, readRecord, writeRecord } from "./record.ts";
import { listWork, snapshotTree } from "./worktree.ts";

export interface OffloadOptions {
  cwd: string;
  box?: string;
  dryRun?: boolean;
  /** Paths to carry although the deny list or .hutchignore holds them back. */
  include?: string[];
  /** For the box's agent: the first input of a conversation that starts fresh there. */
  note?: string;
}

export interface OffloadPlan {
  root: string;
  branch: string;
  base: string;
  box: string;
  guestDir: string;
  files: { path: string; bytes: number }[];
  bytes: number;
  heldBack: { path: string; rule: string }[];
  /** What is and is not carried for submodules, LFS and secrets already in history. */
  notes: string[];
}

export interface OffloadResult extends OffloadPlan {
  dryRun: boolean;
  resumed: boolean;
  /** The agents' conversations carried (the box's agent resumes them); without one it starts with the hand-over note. */
  conversations?: CarriedConversation[];
}

/** A box name from the repository's directory name: lower case, digits and dashes. */
export function defaultBoxName(root: string): string {
  const n = basename(root)
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40);
  return /^[a-z]/.test(n) ? n : `repo-${n || "work"}`;
}

export async function plan(repo: Repo, opts: OffloadOptions): Promise<OffloadPlan> {
  if (!repo.head)
    throw new HutchError("invalid", `${repo.root} has no commit yet`, "commit something first: git add -A && git commit -m start");
  if (!repo.branch) throw new HutchError("invalid", `${repo.root} is on a detached HEAD`, "check out a branch first: git switch -c NAME");
  if ((await git(repo.root, ["ls-files", "-u"])).stdout)
    throw new HutchError("invalid", `${repo.root} has unmerged paths`, "finish or abort the merge first (git status says which)");
  const { files, heldBack, gitlinks, nested } = await listWork(repo, opts.include);
  const notes: string[] = [];
  for (const d of nested) notes.push(`${d} is another git repository inside this one: not carried`);
  for (const g of gitlinks)
    notes.push(`submodule ${g}: its commit is recorded, its work tree and history are not carried (clone it in the box)`);
  const attrs = files.filter((f) => basename(f.path) === ".gitattributes");
  for (const a of attrs)
    if (/filter=lfs/.test(await Bun.file(join(repo.root, a.path)).text()))
      notes.push(
        `git LFS (${a.path}): LFS files go with the content checked out here, committed ones as their pointers; the LFS store is not carried and the box has no LFS filter`,
      );
  const committed = new Set(zsplit((await git(repo.root, ["ls-tree", "-r", "-z", "--name-only", "HEAD"])).stdout));
  for (const h of heldBack)
    if (committed.has(h.path)) notes.push(`${h.path} is held back from the files, but it is committed: the history carries it`);
  const box = opts.box ?? defaultBoxName(repo.root);
  return {
    root: repo.root,
    branch: repo.branch.replace(/^refs\/heads\//, ""),
    base: repo.head,
    box,
    guestDir: `/workspace/${defaultBoxName(repo.root)}`,
    files,
    bytes: files.reduce((n, f) => n + f.bytes, 0),
    heldBack,
    notes,
  };
}

// In the box: fetch the bundle into a fresh repository in a staging directory,
// branch at the base, files from the work-tree commit, index from the index
// commit, then rename it into place. $1 guest dir, $2 staging, $3 bundle, $4
// branch, $5 attempt id, $6 box name, $7/$8 user name and email.
const RESTORE = `set -eu
dst=$1 stage=$2 bundle=$3 branch=$4 id=$5 box=$6
g() { git -c core.hooksPath=/dev/null "$@"; }
# What an interrupted attempt left: its staging copy and its bundle (never this attempt's).
for d in /workspace/.hutch-stage-* /workspace/.hutch-in-*; do [ "$d" = "$(dirname "$bundle")" ] || rm -rf "$d"; done
mkdir -p "$stage" && cd "$stage"
g init -q
g fetch -q --no-tags "$bundle" "+refs/hutch/$box/offload/*:refs/hutch/offload/*"
g update-ref "refs/heads/$branch" refs/hutch/offload/base
g symbolic-ref HEAD "refs/heads/$branch"
g read-tree --reset -u refs/hutch/offload/work
g read-tree refs/hutch/offload/index
[ -n "$7" ] && g config user.name "$7"
[ -n "$8" ] && g config user.email "$8"
printf '%s\\n' "$id" > .git/hutch-offload-id
cd / && mv -T "$stage" "$dst"
rm -rf "$(dirname "$bundle")"
`;

// Prints the attempt id of the complete copy at $1, or nothing.
const PROBE = `cat "$1/.git/hutch-offload-id" 2>/dev/null || true; [ -e "$1" ] && echo exists || true`;

export async function offload(
  d: DaemonClient | null,
  opts: OffloadOptions,
  progress: (s: string) => void = () => {},
): Promise<OffloadResult> {
  checkNote(opts.note);
  const repo = await findRepo(opts.cwd);
  const p = await plan(repo, opts);
  if (opts.dryRun || !d) return { ...p, notes: [...p.notes, ...(await wouldCarry(repo.root))], dryRun: true, resumed: false };

  const prior = await readRecord(repo.gitDir, p.box);
  if (prior?.state === "done")
    throw new HutchError(
      "conflict",
      `this work tree was already offloaded to box ${p.box} (base ${prior.base.slice(0, 12)})`,
      `bring it back first: hutch bring-back ${p.box}`,
    );
  await runningBox(d, p.box);
  if (prior) {
    const probe = (await sh(d, p.box, PROBE, [prior.guestDir], "checking the box's copy")).stdout.split("\n");
    if (probe[0] === prior.id) {
      // Killed after the box's copy was complete, before the record said so.
      await writeRecord(repo.gitDir, { ...prior, state: "done" });
      return { ...p, dryRun: false, resumed: true };
    }
  }
  const probe = (await sh(d, p.box, PROBE, [p.guestDir], "checking the box")).stdout;
  if (probe.includes("exists"))
    throw new HutchError(
      "conflict",
      `box ${p.box} already has ${p.guestDir}, which is not this offload's`,
      `offload into another box: hutch offload --box NAME`,
    );

  const held = p.heldBack.map((h) => h.path);
  const listing = await listWork(repo, opts.include);
  const indexTree = await snapshotTree(repo, false, held);
  const workTree = await snapshotTree(repo, true, held, listing);
  const id = `off_${Date.now().toString(36)}${crypto.randomUUID().slice(0, 8)}`;
  const record: OffloadRecord = {
    version: 1,
    id,
    box: p.box,
    guestDir: p.guestDir,
    branch: p.branch,
    base: p.base,
    indexTree,
    workTree,
    heldBack: held,
    include: opts.include ?? [],
    state: "sending",
    at: new Date().toISOString(),
  };
  await writeRecord(repo.gitDir, record);
  const indexCommit = await commitTree(repo.root, indexTree, p.base, `hutch: the index at offload to ${p.box}`);
  const workCommit = await commitTree(repo.root, workTree, indexCommit, `hutch: the work tree at offload to ${p.box}`);
  await git(repo.root, ["update-ref", offloadRef(p.box, "base"), p.base]);
  await git(repo.root, ["update-ref", offloadRef(p.box, "index"), indexCommit]);
  await git(repo.root, ["update-ref", offloadRef(p.box, "work"), workCommit]);

  const tmp = mkdtempSync(join(tmpdir(), "hutch-offload-"));
  try {
    progress(`bundling ${p.files.length} files and the history of ${p.branch}`);
    const bundle = join(tmp, "bundle");
    await git(repo.root, [
      "bundle",
      "create",
      "-q",
      bundle,
      offloadRef(p.box, "base"),
      offloadRef(p.box, "index"),
      offloadRef(p.box, "work"),
    ]);
    progress(`sending to box ${p.box}`);
    const guestIn = `/workspace/.hutch-in-${id}`;
    await sendDir(d, p.box, tmp, guestIn);
    const name = await out(repo.root, ["config", "user.name"], { ok: [1] });
    const email = await out(repo.root, ["config", "user.email"], { ok: [1] });
    const conv = await carryConversations(
      d,
      {
        box: p.box,
        root: repo.root,
        guestDir: p.guestDir,
        offloadId: id,
        branch: p.branch,
        base: p.base,
        workTree,
        heldBack: held,
        note: opts.note,
      },
      progress,
    );
    // Recorded before the restore, so a rerun that finds the copy complete still knows what was carried.
    record.conversations = conv.conversations;
    await writeRecord(repo.gitDir, record);
    p.notes.push(...conv.notes);
    const stage = `/workspace/.hutch-stage-${id}`;
    await sh(d, p.box, RESTORE, [p.guestDir, stage, `${guestIn}/bundle`, p.branch, id, p.box, name, email], "restoring the work tree");
    await writeRecord(repo.gitDir, { ...record, state: "done" });
    return { ...p, dryRun: false, resumed: false, conversations: conv.conversations };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
