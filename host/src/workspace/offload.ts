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
import { AGENT_BINDINGS, HutchError } from "@hutch/shared/base";
import type { BoxPolicy, CarriedConversation, OffloadOutput, SecretInfo } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { runningBox, sendDir, sh } from "./box.ts";
import { carryConversations, checkNote, wouldCarry } from "./conversation/index.ts";
import { commitTree, findRepo, git, out, type Repo, zsplit } from "./git.ts";
import { type Baseline, type OffloadRecord, offloadRef, readRecord, writeRecord } from "./record.ts";
import {
  applyUpdate,
  baselineOf,
  candidates,
  checkAtHome,
  countBundle,
  exclusions,
  homeStates,
  probeCopy,
  type Sent,
  sameAs,
} from "./update.ts";
import { CARRY, carriable, excludeBlock, ignoredPatterns } from "./ignored.ts";
import { ignoredTree as ignoredTreeOf, listWork, snapshotTree, type Listing } from "./worktree.ts";
import { count } from "@hutch/shared/text";

export interface OffloadOptions {
  cwd: string;
  box?: string;
  dryRun?: boolean;
  /** Paths to carry although the deny list or .hutchignore holds them back. */
  include?: string[];
  /** Git-ignored files to carry (gitignore-style patterns), added to the repository's `hutch.includeIgnored`. */
  includeIgnored?: string[];
  /** For the box's agent: the first input of a conversation that starts fresh there. */
  note?: string;
}

/** What an offload would carry (the plan) and what it did (the result): the wire shape `offload --json` prints. */
export type OffloadResult = OffloadOutput;
export type OffloadPlan = Omit<OffloadOutput, "dryRun" | "resumed" | "updated" | "upToDate" | "sent">;

const NOTHING: Sent = { objects: 0, blobs: 0, bytes: 0 };

/** A box name from the repository's directory name: lower case, digits and dashes. */
export function defaultBoxName(root: string): string {
  const n = basename(root)
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40);
  return /^[a-z]/.test(n) ? n : `repo-${n || "work"}`;
}

/** The listing each plan was made from, so the offload that follows does not walk the work tree a second time. */
const listings = new WeakMap<OffloadPlan, Listing>();
const listingOf = async (repo: Repo, p: OffloadPlan, opts: OffloadOptions): Promise<Listing> =>
  listings.get(p) ?? listWork(repo, opts.include, p.includeIgnored);

export async function plan(repo: Repo, opts: OffloadOptions): Promise<OffloadPlan> {
  if (!repo.head)
    throw new HutchError("invalid", `${repo.root} has no commit yet`, "commit something first: git add -A && git commit -m start");
  if (!repo.branch) throw new HutchError("invalid", `${repo.root} is on a detached HEAD`, "check out a branch first: git switch -c NAME");
  if ((await git(repo.root, ["ls-files", "-u"])).stdout)
    throw new HutchError("invalid", `${repo.root} has unmerged paths`, "finish or abort the merge first (git status says which)");
  const notes: string[] = [];
  const includeIgnored = await ignoredPatterns(repo, opts.includeIgnored);
  const listing = await listWork(repo, opts.include, includeIgnored);
  const { files, heldBack, gitlinks, nested, ignored: asked } = listing;
  const ignored = asked.filter(carriable);
  for (const f of asked)
    if (!carriable(f)) notes.push(`${JSON.stringify(f.path)}: a name with a line break cannot be carried as an ignored file`);
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
  const made: OffloadPlan = {
    root: repo.root,
    branch: repo.branch.replace(/^refs\/heads\//, ""),
    base: repo.head,
    box,
    guestDir: `/workspace/${defaultBoxName(repo.root)}`,
    files,
    bytes: files.reduce((n, f) => n + f.bytes, 0),
    heldBack,
    ignored,
    includeIgnored,
    notes,
  };
  listings.set(made, listing);
  return made;
}

// In the box: fetch the bundle into a fresh repository in a staging directory,
// branch at the base, files from the work-tree commit, index from the index
// commit, the ignored files asked for, then rename it into place. $1 guest
// dir, $2 staging, $3 bundle, $4 branch, $5 attempt id, $6 box name, $7/$8
// user name and email, $9 the ignored files' commit (or empty).
const RESTORE = `set -eu
dst=$1 stage=$2 bundle=$3 branch=$4 id=$5 box=$6 ign=$9 excl=$(dirname "$3")/exclude
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
${CARRY}[ -n "$7" ] && g config user.name "$7"
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
  const result = { ...p, dryRun: false, resumed: false, updated: false, upToDate: false, sent: NOTHING };
  if (opts.dryRun || !d) return { ...result, notes: [...p.notes, ...(await wouldCarry(repo.root))], dryRun: true };

  const prior = await readRecord(repo.gitDir, p.box);
  await runningBox(d, p.box);
  // A box holding a finished offload (or an update of one a kill interrupted) is updated in place.
  if (prior?.state === "done") return update(d, repo, p, prior, await baselineOf(repo.root, prior), opts, progress);
  if (prior?.from) return update(d, repo, p, prior, prior.from, opts, progress);
  if (prior) {
    const probe = (await sh(d, p.box, PROBE, [prior.guestDir], "checking the box's copy")).stdout.split("\n");
    if (probe[0] === prior.id) {
      // Killed after the box's copy was complete, before the record said so.
      await writeRecord(repo.gitDir, { ...prior, state: "done" });
      return { ...result, resumed: true };
    }
  }
  const probe = (await sh(d, p.box, PROBE, [p.guestDir], "checking the box")).stdout;
  if (probe.includes("exists"))
    throw new HutchError(
      "conflict",
      `box ${p.box} already has ${p.guestDir}, which is not this offload's`,
      `offload into another box: hutch offload --box NAME`,
    );

  const trees = await workTrees(repo, p, opts);
  const { held, workTree, carried } = trees;
  const { id, record, workCommit, ignoredCommit } = await beginAttempt(repo, p, opts, { ...trees, guestDir: p.guestDir });

  const tmp = mkdtempSync(join(tmpdir(), "hutch-offload-"));
  try {
    progress(`bundling ${count(p.files.length, "file")} and the history of ${p.branch}`);
    const bundle = join(tmp, "bundle");
    await git(repo.root, [
      "bundle",
      "create",
      "-q",
      bundle,
      offloadRef(p.box, "base"),
      offloadRef(p.box, "index"),
      offloadRef(p.box, "work"),
      ...(ignoredCommit ? [offloadRef(p.box, "ignored")] : []),
    ]);
    await Bun.write(join(tmp, "exclude"), excludeBlock(carried));
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
    p.notes.push(...(await bindCarriedAgents(d, p.box, conv.conversations)));
    const stage = `/workspace/.hutch-stage-${id}`;
    await sh(
      d,
      p.box,
      RESTORE,
      [p.guestDir, stage, `${guestIn}/bundle`, p.branch, id, p.box, name, email, ignoredCommit ?? ""],
      "restoring the work tree",
    );
    const sent = await countBundle(repo.root, [workCommit, ...(ignoredCommit ? [ignoredCommit] : [])], [], Bun.file(bundle).size);
    await writeRecord(repo.gitDir, { ...record, state: "done" });
    return { ...result, sent, conversations: conv.conversations };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * The second offload to a box: its copy (checked in the box to be one the host
 * holds, so no work of the box's is lost) is brought up to the work tree as
 * it is now with a bundle of only what the box lacks, swapped in whole.
 */
async function update(
  d: DaemonClient,
  repo: Repo,
  p: OffloadPlan,
  prior: OffloadRecord,
  from: Baseline,
  opts: OffloadOptions,
  progress: (s: string) => void,
): Promise<OffloadResult> {
  const guestDir = prior.guestDir;
  const result = { ...p, guestDir, dryRun: false, resumed: false, updated: true, upToDate: false, sent: NOTHING };
  const exclude = await candidates(repo.root, p.box, from);
  const copy = await probeCopy(d, p.box, guestDir, prior.id, exclude);
  if (prior.state === "sending" && copy.id === prior.id) {
    // Killed after the new copy was swapped in, before the record said so.
    const { from: _, ...done } = prior;
    await writeRecord(repo.gitDir, { ...done, state: "done" });
    return { ...result, resumed: true };
  }
  if (copy.id !== from.id)
    throw new HutchError(
      "conflict",
      `box ${p.box} has ${copy.id ? "another offload's copy" : "no copy of this offload"} in ${guestDir}`,
      copy.id
        ? `offload into another box: hutch offload --box NAME`
        : `offload into another box (hutch offload --box NAME), or delete ${repo.gitDir}/hutch/${p.box}.json to start over`,
    );
  checkAtHome(copy, await homeStates(repo.root, p.box, from), p.box, guestDir);

  const trees = await workTrees(repo, p, opts);
  const { indexTree, workTree, carried, ignoredTree } = trees;
  if (sameAs(copy, p.base, indexTree, workTree) && (from.ignoredTree ?? null) === ignoredTree) {
    if (prior.state !== "done") {
      // An interrupted update whose work tree has gone back to what the box has: the old copy is the baseline again.
      const { from: _, boxHead: __, ...rest } = prior;
      const { id, base, boxHead, indexTree, workTree, ignoredTree } = from;
      await writeRecord(repo.gitDir, {
        ...rest,
        id,
        base,
        ...(boxHead ? { boxHead } : {}),
        indexTree,
        workTree,
        ...(ignoredTree ? { ignoredTree } : {}),
        state: "done",
      });
      await git(repo.root, ["update-ref", offloadRef(p.box, "work"), from.work]);
      await git(repo.root, ["update-ref", offloadRef(p.box, "index"), `${from.work}^1`]);
      await git(repo.root, ["update-ref", offloadRef(p.box, "base"), `${from.work}^1^1`]);
    }
    return { ...result, upToDate: true };
  }

  const { id, record, workCommit, ignoredCommit } = await beginAttempt(repo, p, opts, { ...trees, guestDir, from });

  const tmp = mkdtempSync(join(tmpdir(), "hutch-offload-"));
  try {
    const bundle = join(tmp, "bundle");
    await Bun.write(join(tmp, "exclude"), excludeBlock(carried));
    const tips = [workCommit, ...(ignoredCommit ? [ignoredCommit] : [])];
    // Only what the box lacks: the commits it was found to hold, and their trees, are left out. A tip the box
    // already holds (the same tree on the same parent, made in the same second as before) stays in: git drops a
    // ref whose tip is left out, and the box fetches the tips by name.
    const leaveOut = (await exclusions(repo.root, copy.has)).filter((c) => !tips.includes(c));
    const refs = [offloadRef(p.box, "work"), ...(ignoredCommit ? [offloadRef(p.box, "ignored")] : [])];
    await git(repo.root, ["bundle", "create", "-q", bundle, ...refs, ...leaveOut.map((c) => `^${c}`)]);
    const sent = await countBundle(repo.root, tips, leaveOut, Bun.file(bundle).size);
    progress(
      `sending ${count(sent.objects, "object")} (${sent.blobs} ${sent.blobs === 1 ? "file's contents" : "files' contents"}, ${count(sent.bytes, "byte")}) to box ${p.box}`,
    );
    const guestIn = `/workspace/.hutch-in-${id}`;
    await sendDir(d, p.box, tmp, guestIn);
    progress(`updating box ${p.box}'s copy`);
    await applyUpdate(d, p.box, {
      guestDir,
      stage: `/workspace/.hutch-stage-${id}`,
      bundle: `${guestIn}/bundle`,
      branch: p.branch,
      id,
      oldWorkTree: copy.workTree!,
      ignored: ignoredCommit,
    });
    const { from: _, ...done } = record;
    await writeRecord(repo.gitDir, { ...done, state: "done" });
    return { ...result, sent };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The trees an offload sends, as the work tree is now: the index, the work tree and the ignored files it carries. */
async function workTrees(repo: Repo, p: OffloadPlan, opts: OffloadOptions) {
  const held = p.heldBack.map((h) => h.path);
  const listing = await listingOf(repo, p, opts);
  const indexTree = await snapshotTree(repo, false, held);
  const workTree = await snapshotTree(repo, true, held, listing);
  const carried = listing.ignored.filter(carriable);
  const ignoredTree = await ignoredTreeOf(repo, carried);
  return { held, indexTree, workTree, carried, ignoredTree };
}

/**
 * An offload attempt begins: its record is written `sending` (with `from`, an
 * update's starting copy) before anything changes, then the index and work
 * tree commits are made and the offload refs point at them.
 */
async function beginAttempt(
  repo: Repo,
  p: OffloadPlan,
  opts: OffloadOptions,
  a: { guestDir: string; held: string[]; indexTree: string; workTree: string; ignoredTree: string | null; from?: Baseline },
) {
  const id = `off_${Date.now().toString(36)}${crypto.randomUUID().slice(0, 8)}`;
  const record: OffloadRecord = {
    version: 1,
    id,
    box: p.box,
    guestDir: a.guestDir,
    branch: p.branch,
    base: p.base,
    indexTree: a.indexTree,
    workTree: a.workTree,
    heldBack: a.held,
    include: opts.include ?? [],
    includeIgnored: p.includeIgnored,
    ...(a.ignoredTree ? { ignoredTree: a.ignoredTree } : {}),
    state: "sending",
    at: new Date().toISOString(),
    ...(a.from ? { from: a.from } : {}),
  };
  await writeRecord(repo.gitDir, record);
  // Dated as the base is: the same index and work tree make the same commits, whenever they are made.
  const date = `@${await out(repo.root, ["show", "-s", "--format=%ct", p.base])} +0000`;
  const indexCommit = await commitTree(repo.root, a.indexTree, p.base, `hutch: the index at offload to ${p.box}`, date);
  const workCommit = await commitTree(repo.root, a.workTree, indexCommit, `hutch: the work tree at offload to ${p.box}`, date);
  await git(repo.root, ["update-ref", offloadRef(p.box, "base"), p.base]);
  await git(repo.root, ["update-ref", offloadRef(p.box, "index"), indexCommit]);
  await git(repo.root, ["update-ref", offloadRef(p.box, "work"), workCommit]);
  const ignoredCommit = await setIgnoredRef(repo, p.box, a.ignoredTree, date);
  return { id, record, workCommit, ignoredCommit };
}

/** refs/hutch/<box>/offload/ignored at a commit of the ignored files' tree, or deleted when none are carried. */
async function setIgnoredRef(repo: Repo, box: string, tree: string | null, date: string): Promise<string | null> {
  if (!tree) {
    await git(repo.root, ["update-ref", "-d", offloadRef(box, "ignored")]);
    return null;
  }
  const c = await commitTree(repo.root, tree, null, `hutch: ignored files carried to ${box}`, date);
  await git(repo.root, ["update-ref", offloadRef(box, "ignored"), c]);
  return c;
}

/**
 * A carried conversation is resumed by its agent in the box, which reaches
 * its model through the broker: the box gets that agent's binding when the
 * user has stored its secret (`hutch run BOX --agent A` then just works), and
 * a note saying how otherwise. Enabling is additive and idempotent.
 */
async function bindCarriedAgents(d: DaemonClient, box: string, carried: readonly CarriedConversation[]): Promise<string[]> {
  const wanted = [...new Set(carried.flatMap((c) => AGENT_BINDINGS[c.agent]))];
  if (wanted.length === 0) return [];
  const stored = new Set((await d.request<SecretInfo[]>("GET", "/v1/secrets")).flatMap((s) => s.bindings));
  const bind = wanted.filter((b) => stored.has(b));
  if (bind.length > 0) await d.request<BoxPolicy>("PATCH", `/v1/boxes/${encodeURIComponent(box)}/policy`, { bindings: bind });
  return wanted
    .filter((b) => !stored.has(b))
    .map(
      (b) =>
        `the carried conversation's agent needs the ${b} binding, and no secret is stored for it: printf %s "$KEY" | hutch secret set ${b} && hutch box policy ${box} --secret ${b}`,
    );
}
