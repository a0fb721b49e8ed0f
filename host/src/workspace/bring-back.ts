// `hutch bring-back`: the box's commits and uncommitted work come home first
// into quarantine refs (refs/hutch/<box>/{head,index,work}: the box's HEAD,
// its index and its work tree as commits, fetched from a bundle and fsck-
// checked), then into the work tree by the first case that is safe:
//   fast-forward: the branch has not moved and the tree is as it was at
//     offload: the branch moves to the box's HEAD, the index and the files
//     become the box's (the staged/unstaged split comes home too);
//   merge: the box's changes touch no file the user changed since offload:
//     they are written into the work tree, uncommitted, HEAD and index as
//     they were;
//   branch: anything else: hutch/<box> holds the box's work, and the work
//     tree and index are not touched.
// The box's config, hooks and attributes never leave it; only objects do.
import { closeSync, constants, fstatSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BringBackOutput } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";
import type { DaemonClient } from "../client/daemon.ts";
import { applyChanges, blocked, checkTree } from "./apply.ts";
import { importBundle } from "./bundle.ts";
import { bringConversationsHome } from "./conversation/home.ts";
import { fetchDir, findBox, runningBox, sh } from "./box.ts";
import { findRepo, git, out, type TreeChange, treeDiff, treeOf } from "./git.ts";
import { type OffloadRecord, offloadRef, quarantineRef, readRecord, writeRecord } from "./record.ts";
import { listWork, snapshotTree } from "./worktree.ts";

export interface BringBackOptions {
  box: string;
  cwd: string;
  into?: string;
  dryRun?: boolean;
}

const SHA = /^[0-9a-f]{40}$/;

// In the box: its HEAD, index and work tree as commits in a bundle of what
// the host lacks. Prints HEAD, the index tree, the work tree and the bundle's size.
const EXPORT = `set -eu
cd "$1"; outd=$2; box=$3; base=$4
g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c user.name=hutch -c user.email=hutch@box "$@"; }
rm -rf "$outd" && mkdir -p "$outd"
head=$(g rev-parse --verify HEAD^{commit})
itree=$(g write-tree)
cp .git/index "$outd/index"
GIT_INDEX_FILE="$outd/index" g add -A
wtree=$(GIT_INDEX_FILE="$outd/index" g write-tree)
rm "$outd/index"
ic=$(g commit-tree "$itree" -p "$head" -m "hutch: the index in box $box")
wc=$(g commit-tree "$wtree" -p "$ic" -m "hutch: the work tree in box $box")
g update-ref refs/hutch-out/index "$ic"
g update-ref refs/hutch-out/work "$wc"
g bundle create -q "$outd/bundle" refs/hutch-out/index refs/hutch-out/work "^$base"
echo "$head $itree $wtree $(wc -c < "$outd/bundle")"
`;

export async function bringBack(
  d: DaemonClient,
  opts: BringBackOptions,
  progress: (s: string) => void = () => {},
): Promise<BringBackOutput> {
  const repo = await findRepo(opts.into ?? opts.cwd);
  const box = opts.box;
  const rec = await readRecord(repo.gitDir, box);
  if (!rec)
    throw new HutchError("not_found", `no offload to box ${box} is recorded in ${repo.root}`, `offload first: hutch offload --box ${box}`);
  if (rec.state !== "done")
    throw new HutchError("conflict", `the offload to box ${box} did not finish`, `rerun it: hutch offload --box ${box}`);
  if (!(await findBox(d, box)))
    throw new HutchError("not_found", `box ${box} is gone`, `what was offloaded is kept in ${offloadRef(box, "work")}`);
  await runningBox(d, box);
  // The conversation first: it comes home whatever happens to the files (rec keeps what came, for the writes below).
  const conv = await bringConversationsHome(d, rec, repo.root, { dryRun: opts.dryRun }, progress);
  if (conv.conversations.length && !opts.dryRun) await writeRecord(repo.gitDir, rec);
  const base: BringBackOutput = {
    case: "nothing",
    box,
    root: repo.root,
    branch: rec.branch,
    dryRun: !!opts.dryRun,
    files: [],
    commits: [],
    quarantine: `refs/hutch/${box}/`,
    conversations: conv.conversations,
    notes: conv.notes,
  };

  progress(`reading box ${box}`);
  const guestOut = `/workspace/.hutch-out-${rec.id}`;
  const said = (await sh(d, box, EXPORT, [rec.guestDir, guestOut, box, boxBase(rec)], "exporting the box's work")).stdout
    .trim()
    .split(/ +/);
  if (said.length !== 4 || !said.slice(0, 3).every((s) => SHA.test(s)) || !/^\d{1,15}$/.test(said[3]!))
    throw new HutchError("failed", `box ${box} answered the export with something else`, `look inside: hutch exec ${box} -- git status`);
  const [sHead, sIndex, sWork] = said as [string, string, string];
  // What the box says is only a hint (the copy below enforces the bound); refusing here spares the transfer.
  const saidSize = Number(said[3]);
  if (saidSize > BUNDLE_MAX) {
    await sh(d, box, 'rm -rf "$1"', [guestOut], "cleaning up");
    throw tooBig(box, saidSize);
  }
  if (sHead === boxBase(rec) && sIndex === rec.indexTree && sWork === rec.workTree) {
    await sh(d, box, 'rm -rf "$1"', [guestOut], "cleaning up");
    return { ...base, reason: "the box has no commits and no changes since the offload" };
  }

  const tmp = mkdtempSync(join(tmpdir(), "hutch-back-"));
  try {
    progress(`fetching the box's work into ${base.quarantine}`);
    // Only the one file, not the directory: whatever else the box left beside it never leaves the box.
    await fetchDir(d, box, `${guestOut}/${BUNDLE_NAME}`, tmp, { maxBytes: BUNDLE_MAX, maxEntries: 1 }).catch((err: unknown) => {
      if (err instanceof HutchError && err.message.includes("exceeds maxBytes")) throw tooBig(box, null);
      throw err;
    });
    const bundle = takeBundle(join(tmp, BUNDLE_NAME), box);
    const got = await importBundle(repo.root, bundle, ["refs/hutch-out/index", "refs/hutch-out/work"]);
    await git(repo.root, ["update-ref", quarantineRef(box, "index"), got["refs/hutch-out/index"]!]);
    await git(repo.root, ["update-ref", quarantineRef(box, "work"), got["refs/hutch-out/work"]!]);
    await sh(d, box, 'rm -rf "$1"', [guestOut], "cleaning up");
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }

  // The refs came from the box: their shape is checked, not assumed. Its HEAD is the index commit's parent.
  const indexC = await out(repo.root, ["rev-parse", "--verify", `${quarantineRef(box, "index")}^{commit}`]);
  const workC = await out(repo.root, ["rev-parse", "--verify", `${quarantineRef(box, "work")}^{commit}`]);
  if ((await out(repo.root, ["rev-parse", `${workC}^1`])) !== indexC)
    throw new HutchError("denied", `box ${box} sent refs of the wrong shape`, `inspect them: git log --graph ${base.quarantine}work`);
  const head = await out(repo.root, ["rev-parse", "--verify", `${indexC}^1^{commit}`]);
  await git(repo.root, ["update-ref", quarantineRef(box, "head"), head]);
  const indexTree = await treeOf(repo.root, indexC);
  const workTree = await treeOf(repo.root, workC);
  for (const [what, t] of [
    ["work", workTree],
    ["index", indexTree],
    ["head", head],
  ] as const)
    await checkTree(repo.root, t, quarantineRef(box, what));

  const commits = (await out(repo.root, ["log", "--format=%H %s", `${boxBase(rec)}..${head}`]))
    .split("\n")
    .filter(Boolean)
    .map((l) => ({ sha: l.slice(0, 40), subject: l.slice(41) }));
  const boxChanges = await treeDiff(repo.root, rec.workTree, workTree);
  const found = { ...base, files: boxChanges.map((c) => c.path), commits };

  const now = await findRepo(repo.root);
  const listing = await listWork(now, rec.include);
  const held = [...new Set([...rec.heldBack, ...listing.heldBack.map((h) => h.path)])];
  const localWork = await snapshotTree(now, true, held, listing);
  const localIndex = await snapshotTree(now, false, held);
  const onBranch = now.branch === `refs/heads/${rec.branch}`;
  // What the user changed since offload: paths that are neither as they were then nor already as the box has
  // them (a rerun after an interrupted bring-back finds its own writes, and they are not the user's).
  const mine = await changedByUser(repo.root, rec.workTree, workTree, localWork);
  const untouched = mine.size === 0 && (await changedByUser(repo.root, rec.indexTree, indexTree, localIndex)).size === 0;

  let reason: string;
  if (!onBranch) reason = `the work tree is no longer on ${rec.branch} (deleted, renamed or switched since offload)`;
  else if (
    (now.head === rec.base || now.head === head) &&
    untouched &&
    // The box may have rewritten its history: a fast-forward only moves the branch forward.
    (await git(repo.root, ["merge-base", "--is-ancestor", now.head, head], { ok: [1] })).code === 0
  ) {
    if ((await blocked(repo.root, boxChanges)).length === 0) {
      if (!opts.dryRun)
        await fastForward(
          repo.root,
          rec.branch,
          now.head ?? rec.base,
          head,
          boxChanges,
          await treeDiff(repo.root, rec.indexTree, indexTree),
        );
      if (!opts.dryRun) await writeRecord(repo.gitDir, { ...rec, base: head, boxHead: head, indexTree, workTree });
      return { ...found, case: "fast-forward" };
    }
    reason = "files differ from the offload's copy";
  } else if ((await git(repo.root, ["merge-base", "--is-ancestor", rec.base, "HEAD"], { ok: [1] })).code !== 0)
    reason = `${rec.branch} was rewritten since offload (it no longer contains the base ${rec.base.slice(0, 12)})`;
  else {
    const overlap = boxChanges.filter((c) => mine.has(c.path)).map((c) => c.path);
    const stuck = overlap.length ? overlap : await blocked(repo.root, boxChanges);
    if (stuck.length === 0) {
      if (!opts.dryRun) await applyChanges(repo.root, boxChanges);
      // The local branch stays where it is (the base is still its ancestor); the box's state is the new baseline.
      if (!opts.dryRun) await writeRecord(repo.gitDir, { ...rec, boxHead: head, indexTree, workTree });
      return { ...found, case: "merge" };
    }
    reason = `both you and the box changed ${stuck.slice(0, 5).join(", ")}${stuck.length > 5 ? ", …" : ""}`;
  }
  return { ...found, ...(await branchCase(repo.root, box, head, indexTree, workTree, workC, opts.dryRun)), reason };
}

/** The one file bring-back takes from the box's output directory. */
export const BUNDLE_NAME = "bundle";
/**
 * The largest bundle of a box's work taken home: the commits and files it
 * made since the offload, which are source, not build output (a build's
 * artifacts are ignored files and stay in the box).
 */
export const BUNDLE_MAX = 2 * 1024 ** 3;

const mib = (n: number) => `${Math.round(n / 1024 ** 2)} MiB`;

const tooBig = (box: string, size: number | null, max = BUNDLE_MAX) =>
  new HutchError(
    "denied",
    `box ${box}'s work is a bundle of ${size === null ? `more than ${max}` : size} bytes, over the bound of ${max} bytes (${mib(max)}); nothing was brought back`,
    `make it smaller in the box (move large files out of the commits, or hutch cp them out: hutch cp ${box}:/workspace/… .), then rerun: hutch bring-back ${box}`,
  );

/**
 * The bundle the box sent, checked where it landed: opened without following a
 * symlink (O_NOFOLLOW), a regular file, within the bound. Returns its path (the
 * directory is private to this process, so the checked file is the one read).
 */
export function takeBundle(path: string, box: string, max = BUNDLE_MAX): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new HutchError(
      "denied",
      code === "ELOOP"
        ? `box ${box} sent its ${BUNDLE_NAME} as a symlink; only a plain file is taken, nothing was brought back`
        : `box ${box} sent no ${BUNDLE_NAME} (${code ?? (err as Error).message}); nothing was brought back`,
      `look inside: hutch exec ${box} -- git status`,
    );
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile())
      throw new HutchError(
        "denied",
        `box ${box} sent its ${BUNDLE_NAME} as something other than a plain file; nothing was brought back`,
        `look inside: hutch exec ${box} -- git status`,
      );
    if (st.size > max) throw tooBig(box, st.size, max);
    return path;
  } finally {
    closeSync(fd);
  }
}

async function changedByUser(root: string, then: string, box: string, now: string): Promise<Set<string>> {
  const fromThen = (await treeDiff(root, then, now)).map((c) => c.path);
  const fromBox = new Set((await treeDiff(root, box, now)).map((c) => c.path));
  return new Set(fromThen.filter((p) => fromBox.has(p)));
}

async function fastForward(root: string, branch: string, from: string, to: string, work: TreeChange[], index: TreeChange[]): Promise<void> {
  await applyChanges(root, work);
  const info = index.map((c) => (/^0+$/.test(c.newSha) ? `0 ${"0".repeat(40)}\t${c.path}` : `${c.newMode} ${c.newSha}\t${c.path}`));
  if (info.length) await git(root, ["update-index", "-z", "--index-info"], { stdin: `${info.join("\0")}\0` });
  // Last, so an interrupted fast-forward is found unfinished and redone (the files and index are idempotent).
  if (from !== to) await git(root, ["update-ref", `refs/heads/${branch}`, to, from]);
}

/** The box's HEAD the last time its work came home (at first, the offload's base): what the next export builds on. */
const boxBase = (rec: OffloadRecord) => rec.boxHead ?? rec.base;

async function branchCase(
  root: string,
  box: string,
  head: string,
  indexTree: string,
  workTree: string,
  workC: string,
  dryRun: boolean | undefined,
): Promise<Pick<BringBackOutput, "case" | "created" | "commands">> {
  const headTree = await treeOf(root, head);
  const target = indexTree === headTree && workTree === headTree ? head : workC;
  let name = `hutch/${box}`;
  for (let i = 2; ; i++) {
    const at = await git(root, ["rev-parse", "-q", "--verify", `refs/heads/${name}`], { ok: [1] });
    if (at.code !== 0 || at.stdout.trim() === target) break;
    name = `hutch/${box}-${i}`;
  }
  if (!dryRun) await git(root, ["update-ref", `refs/heads/${name}`, target]);
  return {
    case: "branch",
    created: name,
    commands: [`git log --stat HEAD..${name}`, `git diff HEAD...${name}`, `git merge ${name}`],
  };
}
