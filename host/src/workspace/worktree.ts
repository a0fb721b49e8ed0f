// The user's work tree as git trees: what offload sends and what bring-back
// compares against. Files are hashed as they are on disk (`hash-object
// --no-filters`), never through `git add`, so no clean filter or fsmonitor
// named by a .gitattributes runs, including one a bring-back wrote. The
// user's own index is never written: the trees come from a private copy.
import { lstatSync, readlinkSync, rmSync } from "node:fs";
import { join } from "node:path";
import { git, out, type Repo, zsplit } from "./git.ts";
import { HUTCHIGNORE, ignoredMatcher, selector } from "./select.ts";

export interface WorkFile {
  path: string;
  bytes: number;
  mode: "100644" | "100755" | "120000";
}

export interface Listing {
  files: WorkFile[];
  heldBack: { path: string; rule: string }[];
  gitlinks: Set<string>;
  /** Untracked directories that are repositories of their own. */
  nested: string[];
  deleted: Set<string>;
  /** Git-ignored files asked for (`--include-ignored`), past the deny list and .hutchignore. */
  ignored: WorkFile[];
}

/** The work tree's files that may go, and those held back (tracked, or untracked and not ignored; ignored ones asked for). */
export async function listWork(repo: Repo, include?: string[], includeIgnored: string[] = []): Promise<Listing> {
  const listed = zsplit((await git(repo.root, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"])).stdout);
  const deleted = new Set(zsplit((await git(repo.root, ["ls-files", "-z", "--deleted"])).stdout));
  const staged = zsplit((await git(repo.root, ["ls-files", "-z", "-s"])).stdout);
  const gitlinks = new Set(staged.filter((l) => l.startsWith("160000 ")).map((l) => l.slice(l.indexOf("\t") + 1)));
  const ignoreFile = Bun.file(join(repo.root, HUTCHIGNORE));
  const sel = selector((await ignoreFile.exists()) ? await ignoreFile.text() : "", include);
  const out: Listing = { files: [], heldBack: [], gitlinks, nested: [], deleted, ignored: [] };
  const file = (path: string): WorkFile | null => {
    const st = lstatSync(join(repo.root, path), { throwIfNoEntry: false });
    if (!st || !(st.isFile() || st.isSymbolicLink())) return null;
    return { path, bytes: st.size, mode: st.isSymbolicLink() ? "120000" : st.mode & 0o100 ? "100755" : "100644" };
  };
  for (const path of [...new Set(listed)]) {
    if (path.endsWith("/")) {
      out.nested.push(path);
      continue;
    }
    const rule = sel.heldBack(path);
    if (rule) out.heldBack.push({ path, rule });
    else if (!deleted.has(path) && !gitlinks.has(path)) {
      const f = file(path);
      if (f) out.files.push(f);
    }
  }
  if (includeIgnored.length) {
    // Only asked for: listing every ignored file walks all of node_modules and build output.
    const wanted = ignoredMatcher(includeIgnored);
    const ignored = zsplit((await git(repo.root, ["ls-files", "-z", "--others", "--ignored", "--exclude-standard"])).stdout);
    for (const path of ignored) {
      if (path.endsWith("/") || !wanted(path)) continue;
      const rule = sel.heldBack(path);
      const f = rule ? null : file(path);
      if (rule) out.heldBack.push({ path, rule });
      else if (f) out.ignored.push(f);
    }
  }
  return out;
}

/** The tree of the git-ignored files carried on request, made in an index of their own (null when there are none). */
export async function ignoredTree(repo: Repo, files: WorkFile[]): Promise<string | null> {
  if (!files.length) return null;
  const tmp = join(repo.gitDir, "hutch", `ignored.${process.pid}.${Date.now()}`);
  await Bun.$`mkdir -p ${join(repo.gitDir, "hutch")}`.quiet();
  try {
    const shas = await hashFiles(repo.root, files);
    const info = files.map((f, i) => `${f.mode} ${shas[i]}\t${f.path}`);
    await git(repo.root, ["update-index", "-z", "--add", "--index-info"], { env: { GIT_INDEX_FILE: tmp }, stdin: `${info.join("\0")}\0` });
    return await out(repo.root, ["write-tree"], { env: { GIT_INDEX_FILE: tmp } });
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Blob ids of files as they are on disk, written to the object store (symlinks by their target). */
async function hashFiles(root: string, files: WorkFile[]): Promise<string[]> {
  const plain = files.filter((f) => f.mode !== "120000" && !f.path.includes("\n"));
  const batch = plain.length
    ? (
        await git(root, ["hash-object", "-w", "--no-filters", "--stdin-paths"], { stdin: `${plain.map((f) => f.path).join("\n")}\n` })
      ).stdout
        .trim()
        .split("\n")
    : [];
  const byPath = new Map(plain.map((f, i) => [f.path, batch[i]!]));
  const shas: string[] = [];
  for (const f of files) {
    const known = byPath.get(f.path);
    if (known) shas.push(known);
    else if (f.mode === "120000") shas.push(await out(root, ["hash-object", "-w", "--stdin"], { stdin: readlinkSync(join(root, f.path)) }));
    else shas.push(await out(root, ["hash-object", "-w", "--no-filters", "--", f.path]));
  }
  return shas;
}

/**
 * The tree of the index, or of the work tree when `work` (tracked changes,
 * deletions and untracked-not-ignored files), with the held-back paths taken
 * out so no object of theirs is referenced.
 */
export async function snapshotTree(repo: Repo, work: boolean, heldBack: string[], listing?: Listing): Promise<string> {
  const tmp = join(repo.gitDir, "hutch", `index.${process.pid}.${Date.now()}`);
  await Bun.$`mkdir -p ${join(repo.gitDir, "hutch")}`.quiet();
  const index = Bun.file(join(repo.gitDir, "index"));
  if (await index.exists()) await Bun.write(tmp, index);
  const env = { GIT_INDEX_FILE: tmp };
  try {
    const remove = [...heldBack];
    if (work) {
      const l = listing ?? (await listWork(repo));
      const shas = await hashFiles(repo.root, l.files);
      const info = l.files.map((f, i) => `${f.mode} ${shas[i]}\t${f.path}`);
      if (info.length) await git(repo.root, ["update-index", "-z", "--index-info"], { env, stdin: `${info.join("\0")}\0` });
      remove.push(...l.deleted);
    }
    if (remove.length) await git(repo.root, ["update-index", "-z", "--force-remove", "--stdin"], { env, stdin: `${remove.join("\0")}\0` });
    return await out(repo.root, ["write-tree"], { env });
  } finally {
    rmSync(tmp, { force: true });
  }
}
