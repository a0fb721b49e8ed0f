// A second offload to a box that holds a finished one: the box's copy is
// brought up to the work tree as it is now, in place, with a bundle of only
// what the box lacks (`^` the commits it already has), so a one-file change
// sends that file's blob and a few trees and commits. Only when the box's copy
// is still exactly the last baseline (HEAD, index and work tree, checked in
// the box); work of the box's own must come home first. Staged like the first
// offload: the new copy is assembled beside the old one (hard links, so the
// unchanged files cost no copy) and swapped in by two renames, journaled so a
// kill at any point leaves the old copy or the new one, never a mix.
import { HutchError } from "@hutch/shared/base";
import type { OffloadOutput } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { sh } from "./box.ts";
import { git, out, treeOf } from "./git.ts";
import { CARRY } from "./ignored.ts";
import { type Baseline, type OffloadRecord, offloadRef, quarantineRef } from "./record.ts";

const SHA = /^[0-9a-f]{40}$/;

/** What an offload sent: objects in the bundle (blobs among them) and the bundle's bytes. */
/** What travelled to the box: the bundle's objects (blobs among them) and bytes. */
export type Sent = OffloadOutput["sent"];

/** The box's copy as found: the attempt id it carries, its HEAD, index and work tree, and which commits it has. */
export interface BoxCopy {
  id: string | null;
  head: string | null;
  indexTree: string | null;
  workTree: string | null;
  has: string[];
}

const BOX_GIT = `g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c gc.auto=0 -c maintenance.auto=false "$@"; }`;

// In the box: first finish or undo a swap a kill interrupted ($2 the attempt
// id: its staged copy is complete when it carries the id), then print the
// copy's id, HEAD, index tree and work tree (from a private index, as
// bring-back's export makes it), then each of the candidate commits
// ($3..) the copy has.
const PROBE = `set -u
dst=$1 id=$2; shift 2
${BOX_GIT}
stage=/workspace/.hutch-stage-$id old=/workspace/.hutch-old-$id
if [ ! -e "$dst" ]; then
  if [ "$(cat "$stage/.git/hutch-offload-id" 2>/dev/null)" = "$id" ]; then mv -T "$stage" "$dst" && rm -rf "$old"
  elif [ -d "$old" ]; then mv -T "$old" "$dst"; fi
fi
[ -d "$dst/.git" ] || { echo none; exit 0; }
cd "$dst" || exit 1
cur=$(cat .git/hutch-offload-id 2>/dev/null || echo none)
head=$(g rev-parse -q --verify 'HEAD^{commit}' || echo none)
itree=$(g write-tree 2>/dev/null || echo none)
tmp=$(mktemp)
cp .git/index "$tmp" 2>/dev/null || rm -f "$tmp"
wtree=$(GIT_INDEX_FILE=$tmp g add -A 2>/dev/null && GIT_INDEX_FILE=$tmp g write-tree 2>/dev/null || echo none)
rm -f "$tmp"
echo "$cur $head $itree $wtree"
for c in "$@"; do g cat-file -e "$c^{commit}" 2>/dev/null && echo "$c"; done
exit 0
`;

export async function probeCopy(d: DaemonClient, box: string, guestDir: string, id: string, candidates: string[]): Promise<BoxCopy> {
  const lines = (await sh(d, box, PROBE, [guestDir, id, ...candidates], "checking the box's copy")).stdout.trim().split("\n");
  const word = (s: string | undefined) => (s && SHA.test(s) ? s : null);
  const [cur, head, itree, wtree] = (lines[0] ?? "").split(" ");
  return {
    id: cur && cur !== "none" && /^off_[0-9a-z-]+$/.test(cur) ? cur : null,
    head: word(head),
    indexTree: word(itree),
    workTree: word(wtree),
    has: lines.slice(1).filter((l) => candidates.includes(l)),
  };
}

/** Where the box's HEAD was when its work last came home (at first, the offload's base). */
export const boxBase = (b: Baseline) => b.boxHead ?? b.base;

/** The baseline a done record stands for: what the box's copy should still be. */
export async function baselineOf(root: string, r: OffloadRecord): Promise<Baseline> {
  const ignored = await git(root, ["rev-parse", "-q", "--verify", `${offloadRef(r.box, "ignored")}^{commit}`], { ok: [1] });
  return {
    id: r.id,
    base: r.base,
    ...(r.boxHead ? { boxHead: r.boxHead } : {}),
    indexTree: r.indexTree,
    workTree: r.workTree,
    work: await resolve(root, offloadRef(r.box, "work")),
    ...(r.ignoredTree && ignored.code === 0 ? { ignoredTree: r.ignoredTree, ignored: ignored.stdout.trim() } : {}),
  };
}

/** A state of the box's copy that is at home: the last baseline, or what the last bring-back fetched into quarantine. */
export interface HomeState {
  head: string;
  indexTree: string;
  workTree: string;
}

/** Refuses unless the box's copy is one the host holds: anything else is work of the box's own not yet brought home. */
export function checkAtHome(copy: BoxCopy, states: HomeState[], box: string, guestDir: string): void {
  if (states.some((s) => copy.head === s.head && copy.indexTree === s.indexTree && copy.workTree === s.workTree)) return;
  const b = states[0]!;
  const what: string[] = [];
  if (copy.head !== b.head) what.push("new commits (or another HEAD)");
  if (copy.indexTree !== b.indexTree) what.push("staged changes");
  if (copy.workTree !== b.workTree) what.push("changed or new files");
  throw new HutchError(
    "conflict",
    `box ${box} has work of its own in ${guestDir} that was not brought back (${what.join(", ") || "changes"}); an offload would overwrite it`,
    `bring it home first: hutch bring-back ${box} (then offload again), or offload into another box: hutch offload --box NAME`,
  );
}

/** The states of the box's copy the host holds: the baseline, and the quarantine refs of the last bring-back. */
export async function homeStates(root: string, box: string, b: Baseline): Promise<HomeState[]> {
  const states: HomeState[] = [{ head: boxBase(b), indexTree: b.indexTree, workTree: b.workTree }];
  const q = await Promise.all(
    (["head", "index", "work"] as const).map(async (w) => {
      const r = await git(root, ["rev-parse", "-q", "--verify", `${quarantineRef(box, w)}^{commit}`], { ok: [1] });
      return r.code === 0 ? r.stdout.trim() : null;
    }),
  );
  const [head, index, work] = q;
  if (head && index && work) states.push({ head, indexTree: await treeOf(root, index), workTree: await treeOf(root, work) });
  return states;
}

/** Commits the host has that the box may have, to leave out of the bundle (the box is asked which it holds). */
export async function candidates(root: string, box: string, b: Baseline): Promise<string[]> {
  const refs = [quarantineRef(box, "head"), quarantineRef(box, "index"), quarantineRef(box, "work")];
  const found = [boxBase(b), b.work, ...(b.ignored ? [b.ignored] : [])];
  for (const r of refs) {
    const at = await git(root, ["rev-parse", "-q", "--verify", `${r}^{commit}`], { ok: [1] });
    if (at.code === 0) found.push(at.stdout.trim());
  }
  return [...new Set(found.filter((s) => SHA.test(s)))];
}

/**
 * What to leave out of the bundle: the commits the box holds, and their
 * trees and those of the two commits below each (a work commit's index and
 * base). Git leaves out the objects of a commit it is told the other side has
 * only where that commit borders what is sent; the trees, named too, take
 * every file the box already has out of the pack.
 */
export async function exclusions(root: string, has: string[]): Promise<string[]> {
  const trees = new Set<string>();
  for (const c of has)
    for (const t of (await out(root, ["log", "--format=%T", "-n", "3", "--first-parent", c])).split("\n")) if (SHA.test(t)) trees.add(t);
  return [...has, ...trees];
}

/** Counts what a bundle holds: the pack's objects by type, and the file's size. */
export async function countBundle(root: string, tips: string[], exclude: string[], bytes: number): Promise<Sent> {
  const listed = await git(root, ["rev-list", "--objects", "--no-object-names", ...tips, ...exclude.map((c) => `^${c}`)]);
  const ids = listed.stdout.trim().split("\n").filter(Boolean);
  const types = ids.length
    ? (await git(root, ["cat-file", "--batch-check=%(objecttype)"], { stdin: `${ids.join("\n")}\n` })).stdout.trim().split("\n")
    : [];
  return { objects: ids.length, blobs: types.filter((t) => t === "blob").length, bytes };
}

// In the box: the new copy assembled beside the old one, then swapped in.
// The work tree and the object store are hard-linked (git replaces a file it
// checks out and never writes into one, and objects are never rewritten); the
// rest of .git (index, refs, logs, config) is copied, since git appends to
// logs in place. One cp for all the entries (-exec … +): a process per
// top-level entry cost ~0.25 s of a one-file update in a process box. The work commit comes from the bundle, the index and base
// are its parents. The staged copy carries the new id (written last) before
// the swap; PROBE finishes or undoes a swap a kill interrupted.
// $1 guest dir, $2 staging, $3 bundle, $4 branch, $5 attempt id, $6 box name, $7 the old work tree,
// $8 the ignored files' commit (or empty).
const UPDATE = `set -eu
dst=$1 stage=$2 bundle=$3 branch=$4 id=$5 box=$6 oldwork=$7 ign=$8 excl=$(dirname "$3")/exclude
${BOX_GIT}
old=/workspace/.hutch-old-$id
for d in /workspace/.hutch-stage-* /workspace/.hutch-in-* /workspace/.hutch-old-*; do [ "$d" = "$(dirname "$bundle")" ] || rm -rf "$d"; done
mkdir -p "$stage/.git"
find "$dst" -mindepth 1 -maxdepth 1 ! -name .git -exec cp -al -t "$stage/" {} +
cp -al "$dst/.git/objects" "$stage/.git/"
find "$dst/.git" -mindepth 1 -maxdepth 1 ! -name objects ! -name hutch-offload-id -exec cp -a -t "$stage/.git/" {} +
cd "$stage"
g fetch -q --no-tags --no-write-fetch-head "$bundle" "+refs/hutch/$box/offload/work:refs/hutch/offload/work"
if [ -n "$ign" ]; then g fetch -q --no-tags --no-write-fetch-head "$bundle" "+refs/hutch/$box/offload/ignored:refs/hutch/offload/ignored"; fi
work=$(g rev-parse --verify 'refs/hutch/offload/work^{commit}')
index=$(g rev-parse --verify "$work^1^{commit}")
base=$(g rev-parse --verify "$index^1^{commit}")
g update-ref refs/hutch/offload/index "$index"
g update-ref refs/hutch/offload/base "$base"
g update-ref "refs/heads/$branch" "$base"
g symbolic-ref HEAD "refs/heads/$branch"
# The index as the work tree was (the probe checked it is), its stat data refreshed, so only what changed is rewritten.
g read-tree "$oldwork"
g update-index -q --refresh >/dev/null 2>&1 || true
g read-tree --reset -u "$work"
g read-tree "$index"
${CARRY}printf '%s\\n' "$id" > .git/hutch-offload-id.tmp && mv .git/hutch-offload-id.tmp .git/hutch-offload-id
cd /
mv -T "$dst" "$old"
mv -T "$stage" "$dst"
rm -rf "$old" "$(dirname "$bundle")"
`;

export async function applyUpdate(
  d: DaemonClient,
  box: string,
  args: { guestDir: string; stage: string; bundle: string; branch: string; id: string; oldWorkTree: string; ignored: string | null },
): Promise<void> {
  await sh(
    d,
    box,
    UPDATE,
    [args.guestDir, args.stage, args.bundle, args.branch, args.id, box, args.oldWorkTree, args.ignored ?? ""],
    "updating the box's copy",
  );
}

/** Whether the box's copy already is the work tree as it is now: nothing to send. */
export const sameAs = (copy: BoxCopy, base: string, indexTree: string, workTree: string) =>
  copy.head === base && copy.indexTree === indexTree && copy.workTree === workTree;

export const resolve = (root: string, rev: string) => out(root, ["rev-parse", "--verify", `${rev}^{commit}`]);
