// Git-ignored files carried on request. By default ignored output (build
// dirs, dependency caches) is rebuilt in the box, not copied; `--include-
// ignored GLOB` and the repository's `hutch.includeIgnored` git config carry
// the matching ones (still past the deny list and .hutchignore). They travel
// as a commit of their own (refs/hutch/<box>/offload/ignored), written into
// the box's work tree without touching its index, and named in the box's
// .git/info/exclude so its git keeps ignoring them (bring-back and the next
// offload's check see the same work tree as without them).
import { git, type Repo } from "./git.ts";
import type { WorkFile } from "./worktree.ts";

/** The patterns asked for: the flag's, then the repository's `hutch.includeIgnored` values. */
export async function ignoredPatterns(repo: Repo, flag: string[] = []): Promise<string[]> {
  const cfg = await git(repo.root, ["config", "--get-all", "hutch.includeIgnored"], { ok: [1] });
  const fromConfig = cfg.code === 0 ? cfg.stdout.split("\n").map((l) => l.trim()) : [];
  return [...new Set([...flag, ...fromConfig].filter(Boolean))];
}

const BEGIN = "# hutch: carried ignored files, begin";
const END = "# hutch: carried ignored files, end";

/** A gitignore line matching exactly this path from the root. */
export function exactPattern(path: string): string {
  return `/${path.replace(/[\\*?[]/g, (c) => `\\${c}`).replace(/ $/, "\\ ")}`;
}

/** The block the box's .git/info/exclude gets (replacing an earlier one): each carried path, exactly. */
export function excludeBlock(files: WorkFile[]): string {
  if (!files.length) return "";
  return `${[BEGIN, ...files.map((f) => exactPattern(f.path)), END].join("\n")}\n`;
}

/** Files whose name a gitignore line cannot hold (a newline): not carried. */
export const carriable = (f: WorkFile) => !f.path.includes("\n") && !f.path.includes("\r");

// Box-side shell, run in the repository after its index is read: the ignored
// files from $ign (a commit, or empty) written through an index of their own,
// and the exclude block from the file $excl put in place of the old one.
export const CARRY = `if [ -n "$ign" ]; then
  GIT_INDEX_FILE=.git/hutch-ignored.index g read-tree "$(g rev-parse --verify "$ign^{commit}")"
  GIT_INDEX_FILE=.git/hutch-ignored.index g checkout-index -a -f
  rm -f .git/hutch-ignored.index
fi
mkdir -p .git/info && touch .git/info/exclude
sed -i '/^${BEGIN}$/,/^${END}$/d' .git/info/exclude
if [ -s "$excl" ]; then cat "$excl" >> .git/info/exclude; fi
`;
