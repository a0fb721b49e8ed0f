// Writing what came out of a box into the user's work tree, by hutch itself
// rather than by a git checkout: no filter, attribute or driver runs. Every
// change is checked first (all or nothing): the path must stay inside the
// repository and below no symlink, and the file must still be exactly what
// it was at offload, so an edit of the user's is never overwritten. A symlink
// from the box must point inside the repository.
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

/** Every symlink in a tree from a box, checked; throws naming the first that leaves the repository. */
export async function checkTree(root: string, tree: string, where: string): Promise<void> {
  const f = zsplit((await git(root, ["ls-tree", "-r", "-z", "--full-tree", tree])).stdout);
  for (const line of f) {
    const [meta, path] = [line.slice(0, line.indexOf("\t")), line.slice(line.indexOf("\t") + 1)];
    const [mode, , sha] = meta.split(" ") as [string, string, string];
    const bad = badPath(path);
    if (bad) throw refused(`${path} ${bad}`, where);
    if (mode !== "120000") continue;
    const target = (await git(root, ["cat-file", "blob", sha])).stdout;
    const why = badLink(path, target);
    if (why) throw refused(`the symlink ${path} ${why}`, where);
  }
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
