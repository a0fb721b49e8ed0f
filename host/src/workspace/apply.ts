// Writing what came out of a box into the user's work tree, by hutch itself
// rather than by a git checkout: no filter, attribute or driver runs. Every
// change is checked first (all or nothing): the path must stay inside the
// repository and below no symlink, and the file must still be exactly what
// it was at offload, so an edit of the user's is never overwritten. A symlink
// from the box must resolve inside the repository: its target is followed
// through the tree it arrives in and the work tree (as realpath would, link
// by link, `..` taken after each link is expanded), so links that each look
// harmless cannot chain out (`d -> .`, `e -> d/..`).
import { chmodSync, lstatSync, mkdirSync, readlinkSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { HutchError } from "@hutch/shared/base";
import { git, type TreeChange, zsplit } from "./git.ts";

const ZERO = /^0+$/;

/** Why a repository-relative path from a box is refused, or null. */
export function badPath(path: string): string | null {
  if (!path || path.startsWith("/") || path.includes("\0")) return "not a relative path";
  const parts = path.split("/");
  if (parts.some((p) => p === "" || p === "." || p === "..")) return "has an empty, . or .. component";
  if (parts.some((p) => p.toLowerCase() === ".git")) return "names a .git directory";
  return null;
}

/** Why a symlink at path with this target is refused (it leaves the repository), or null. */
export function badLink(path: string, target: string): string | null {
  if (target.startsWith("/")) return `points at an absolute path (${target})`;
  const resolved = normalize(join(dirname(path), target));
  if (resolved === ".." || resolved.startsWith("../")) return `points outside the repository (${target})`;
  return null;
}

/** Links followed while resolving one target: Linux's MAXSYMLINKS. More is a loop, or a chain built to confuse. */
export const LINK_DEPTH_MAX = 40;

/** An entry met while resolving: a symlink (with its target), or anything else (a directory, a file, nothing). */
export type Lookup = (path: string) => { link: string } | null;

/**
 * Where a symlink at `path` (repository-relative) with `target` ends up, resolved
 * as the kernel would: component by component, each symlink met expanded in
 * place (so `..` after it is taken from where the link leads, not lexically),
 * at most LINK_DEPTH_MAX links. Returns the repository-relative path it
 * reaches, or why it is refused: it leaves the repository, reaches an absolute
 * path, enters .git, or loops.
 */
export function resolveLink(path: string, target: string, lookup: Lookup): { at: string } | { why: string } {
  const stack = dirname(path) === "." ? [] : dirname(path).split("/");
  let queue = target.split("/");
  if (target.startsWith("/")) return { why: `points at an absolute path (${target})` };
  const seen: string[] = [];
  while (queue.length) {
    const c = queue.shift()!;
    if (c === "" || c === ".") continue;
    if (c === "..") {
      if (!stack.length) return { why: outside(target, seen) };
      stack.pop();
      continue;
    }
    const p = [...stack, c].join("/");
    const e = lookup(p);
    if (e) {
      seen.push(p);
      if (seen.length > LINK_DEPTH_MAX)
        return { why: `goes through more than ${LINK_DEPTH_MAX} symlinks, a loop (${target}, through ${seen.slice(0, 5).join(" -> ")} …)` };
      if (e.link.startsWith("/")) return { why: `points at an absolute path through the symlink ${p} (${target}, ${p} -> ${e.link})` };
      queue = [...e.link.split("/"), ...queue];
      continue;
    }
    if (!stack.length && c.toLowerCase() === ".git") return { why: `points into .git (${target})` };
    stack.push(c);
  }
  return { at: stack.join("/") };
}

const outside = (target: string, through: string[]) =>
  `points outside the repository (${target}${through.length ? `, through the symlink${through.length > 1 ? "s" : ""} ${through.join(", ")}` : ""})`;

/**
 * Every path and symlink in a tree from a box, checked; throws naming the
 * first that is refused. Symlinks are resolved against the tree itself, and
 * where it has nothing at a path, against the work tree at `root` (a local
 * untracked symlink is followed too); nothing is written.
 */
export async function checkTree(root: string, tree: string, where: string): Promise<void> {
  const f = zsplit((await git(root, ["ls-tree", "-r", "-t", "-z", "--full-tree", tree])).stdout);
  const entries = new Map<string, { mode: string; sha: string }>();
  const links: string[] = [];
  for (const line of f) {
    const [meta, path] = [line.slice(0, line.indexOf("\t")), line.slice(line.indexOf("\t") + 1)];
    const [mode, , sha] = meta.split(" ") as [string, string, string];
    const bad = badPath(path);
    if (bad) throw refused(`${path} ${bad}`, where);
    entries.set(path, { mode, sha });
    if (mode === "120000") links.push(path);
  }
  if (!links.length) return;
  const targets = await blobs(
    root,
    links.map((p) => entries.get(p)!.sha),
  );
  const treeTarget = new Map(links.map((p, i) => [p, targets[i]!]));
  const disk = diskLinks(root);
  const lookup: Lookup = (p) => {
    const t = treeTarget.get(p);
    if (t !== undefined) return { link: t };
    return entries.has(p) ? null : disk(p);
  };
  for (const path of links) {
    const target = treeTarget.get(path)!;
    const r = resolveLink(path, target, lookup);
    if ("why" in r) throw refused(`the symlink ${path} ${r.why}`, where);
  }
}

/** The blobs' contents, in one git process (a tree may hold many links). */
async function blobs(root: string, shas: string[]): Promise<string[]> {
  const r = await git(root, ["cat-file", "--batch"], { stdin: `${shas.join("\n")}\n` });
  const out: string[] = [];
  const bytes = r.bytes;
  const dec = new TextDecoder();
  let at = 0;
  for (const sha of shas) {
    const nl = bytes.indexOf(10, at);
    const head = dec.decode(bytes.subarray(at, nl)).split(" ");
    if (head[0] !== sha || head[1] !== "blob") throw new HutchError("failed", `git could not read the symlink blob ${sha.slice(0, 12)}`);
    const size = Number(head[2]);
    out.push(dec.decode(bytes.subarray(nl + 1, nl + 1 + size)));
    at = nl + 1 + size + 1;
  }
  return out;
}

/** Symlinks in the work tree, looked up without following any (a path below a local symlink is that link's business, not a file here). */
function diskLinks(root: string): Lookup {
  const cache = new Map<string, { link: string } | null | "below">();
  const look = (p: string): { link: string } | null | "below" => {
    const hit = cache.get(p);
    if (hit !== undefined) return hit;
    const up = p.includes("/") ? look(p.slice(0, p.lastIndexOf("/"))) : null;
    let v: { link: string } | null | "below" = null;
    if (up !== null) v = "below";
    else {
      const st = lstatSync(join(root, p), { throwIfNoEntry: false });
      if (st?.isSymbolicLink()) v = { link: readlinkSync(join(root, p), "utf8") };
    }
    cache.set(p, v);
    return v;
  };
  return (p) => {
    const v = look(p);
    return v === "below" ? null : v;
  };
}

const refused = (what: string, where: string) =>
  new HutchError(
    "denied",
    `refused what the box sent: ${what}; nothing was applied`,
    `the box's work is kept in ${where}: inspect it with git log -p ${where}`,
  );

async function localSha(root: string, path: string): Promise<string | null> {
  const abs = join(root, path);
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(abs);
  } catch {
    return null;
  }
  if (st.isSymbolicLink()) return (await git(root, ["hash-object", "--stdin"], { stdin: readlinkSync(abs) })).stdout.trim();
  if (!st.isFile()) return "not-a-file";
  return (await git(root, ["hash-object", "--no-filters", "--", path])).stdout.trim();
}

/** No directory on the way to path may be a symlink (a write through it would land outside). */
function belowSymlink(root: string, path: string): string | null {
  const parts = path.split("/");
  for (let i = 1; i < parts.length; i++) {
    const dir = parts.slice(0, i).join("/");
    try {
      if (lstatSync(join(root, dir)).isSymbolicLink()) return dir;
    } catch {
      return null;
    }
  }
  return null;
}

/** The paths where the work tree holds neither what the change replaces nor what it brings. */
export async function blocked(root: string, changes: TreeChange[]): Promise<string[]> {
  const out: string[] = [];
  for (const c of changes) {
    if (c.newMode === "160000" || c.oldMode === "160000") continue;
    if (belowSymlink(root, c.path)) {
      out.push(c.path);
      continue;
    }
    // What it was at offload, or already the box's version (a rerun after an interrupted apply).
    const have = await localSha(root, c.path);
    const ok = [c.oldSha, c.newSha].map((s) => (ZERO.test(s) ? null : s));
    if (!ok.includes(have)) out.push(c.path);
  }
  return out;
}

/** Applies changes (already checked by checkTree and blocked) to the work tree. */
export async function applyChanges(root: string, changes: TreeChange[]): Promise<void> {
  for (const c of changes) {
    if (c.newMode === "160000" || c.oldMode === "160000") continue;
    const abs = join(root, c.path);
    if (ZERO.test(c.newSha)) {
      rmSync(abs, { force: true });
      continue;
    }
    mkdirSync(dirname(abs), { recursive: true });
    const blob = (await git(root, ["cat-file", "blob", c.newSha])).bytes;
    const tmp = join(dirname(abs), `.hutch-tmp-${process.pid}-${Math.random().toString(36).slice(2)}`);
    if (c.newMode === "120000") symlinkSync(new TextDecoder().decode(blob), tmp);
    else {
      writeFileSync(tmp, blob);
      chmodSync(tmp, (c.newMode === "100755" ? 0o777 : 0o666) & ~process.umask());
    }
    try {
      renameSync(tmp, abs);
    } catch (err) {
      unlinkSync(tmp);
      throw err;
    }
  }
}
