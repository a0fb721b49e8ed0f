// The host's git, run on the user's repository with everything a box could
// have planted or pointed at switched off: no hooks, no fsmonitor, no pager,
// no external diff or textconv, no auto gc or maintenance, no submodule
// recursion. Objects from a box come in through bundle.ts. Box-written
// config never reaches the host (only objects travel, in a bundle), so these
// flags guard against the user's own settings meeting box-written content.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HutchError } from "@hutch/shared/base";
import { env as hostEnv } from "../env.ts";

const HARDENED = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.pager=cat",
  "-c",
  "core.sshCommand=false",
  "-c",
  "diff.external=",
  "-c",
  "gc.auto=0",
  "-c",
  "maintenance.auto=false",
  "-c",
  "fetch.recurseSubmodules=false",
  "-c",
  "submodule.recurse=false",
  "-c",
  "transfer.fsckObjects=true",
  "-c",
  "fetch.fsckObjects=true",
  "-c",
  "protocol.ext.allow=never",
];

/** Identity for the commits hutch itself writes (the staged and unstaged work, recorded as commits). */
const HUTCH_IDENTITY = {
  GIT_AUTHOR_NAME: "hutch",
  GIT_AUTHOR_EMAIL: "hutch@localhost",
  GIT_COMMITTER_NAME: "hutch",
  GIT_COMMITTER_EMAIL: "hutch@localhost",
};

export interface GitResult {
  code: number;
  stdout: string;
  bytes: Uint8Array;
  stderr: string;
}

function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(hostEnv.all())) {
    // Another repository's or index's location must not leak in from the caller.
    if (v === undefined || (k.startsWith("GIT_") && k !== "GIT_CONFIG_NOSYSTEM")) continue;
    env[k] = v;
  }
  return { ...env, GIT_TERMINAL_PROMPT: "0", GIT_OPTIONAL_LOCKS: "0", ...HUTCH_IDENTITY, ...extra };
}

export interface GitOptions {
  env?: Record<string, string>;
  stdin?: string | Uint8Array | ReadableStream<Uint8Array>;
  /** Exit codes that are answers, not failures (merge-base --is-ancestor's 1). */
  ok?: number[];
}

/**
 * Commands that write an index. Writing one, git re-reads any "racily clean"
 * entry's file (changed in the same second as the index) to compare it, and
 * reads it through the clean or process filter that .gitattributes in the work
 * tree names, which a box may have written and the user's config may define.
 * So these run with an empty directory as their cwd and work tree (GIT_DIR
 * pointing at the repository): there is no file to read, and no filter runs.
 * None of them needs the work tree: hutch hashes files itself (--no-filters).
 */
const INDEX_WRITERS = new Set(["update-index", "write-tree", "read-tree"]);

const gitDirs = new Map<string, string>();
async function gitDirOf(root: string): Promise<string> {
  let dir = gitDirs.get(root);
  if (!dir) {
    dir = (await git(root, ["rev-parse", "--absolute-git-dir"])).stdout.trim();
    gitDirs.set(root, dir);
  }
  return dir;
}

/** Runs git in cwd; throws a HutchError naming the command when it fails. */
export async function git(cwd: string, args: string[], opts: GitOptions = {}): Promise<GitResult> {
  if (!INDEX_WRITERS.has(args[0] ?? "")) return run(cwd, args, opts.env ?? {}, opts);
  // A directory of this call's own, gone when it ends: one kept for the process outlived every killed CLI.
  const empty = mkdtempSync(join(tmpdir(), "hutch-no-worktree-"));
  try {
    return await run(empty, args, { ...opts.env, GIT_DIR: await gitDirOf(cwd), GIT_WORK_TREE: empty }, opts);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
}

async function run(cwd: string, args: string[], env: Record<string, string>, opts: GitOptions): Promise<GitResult> {
  const proc = Bun.spawn(["git", ...HARDENED, ...args], {
    cwd,
    env: cleanEnv(env),
    stdin: opts.stdin === undefined ? "ignore" : typeof opts.stdin === "string" ? new TextEncoder().encode(opts.stdin) : opts.stdin,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [bytes, stderr, code] = await Promise.all([new Response(proc.stdout).bytes(), new Response(proc.stderr).text(), proc.exited]);
  const r = { code, bytes, stdout: new TextDecoder().decode(bytes), stderr };
  if (code !== 0 && !(opts.ok ?? []).includes(code))
    throw new HutchError("failed", `git ${args.slice(0, 2).join(" ")} failed: ${stderr.trim().split("\n").slice(-3).join("; ")}`);
  return r;
}

export const out = async (cwd: string, args: string[], opts?: GitOptions) => (await git(cwd, args, opts)).stdout.trim();

/** NUL-separated output as its fields, without the empty tail. */
export const zsplit = (s: string) => s.split("\0").filter((x) => x !== "");

export interface Repo {
  root: string;
  gitDir: string;
  /** refs/heads/NAME, or null on a detached HEAD. */
  branch: string | null;
  head: string | null;
}

/** The work tree dir is in, or a refusal that says what to do. */
export async function findRepo(dir: string): Promise<Repo> {
  const top = await git(dir, ["rev-parse", "--show-toplevel", "--absolute-git-dir"], { ok: [128] }).catch(() => null);
  if (top?.code !== 0 || top.stdout.trim().split("\n").length < 2)
    throw new HutchError(
      "invalid",
      `${dir} is not inside a git work tree`,
      "cd into a repository's working tree (or git init one) and rerun",
    );
  const [root, gitDir] = top.stdout.trim().split("\n") as [string, string];
  const branch = await git(root, ["symbolic-ref", "-q", "HEAD"], { ok: [1] });
  const head = await git(root, ["rev-parse", "-q", "--verify", "HEAD^{commit}"], { ok: [1] });
  return { root, gitDir, branch: branch.code === 0 ? branch.stdout.trim() : null, head: head.code === 0 ? head.stdout.trim() : null };
}

/**
 * A commit of tree on parent, dated `date` (a git date, e.g. `@1700000000 +0000`)
 * for author and committer: hutch's own commits of a state are then the same
 * object for the same state, so a box that holds one is never sent it again.
 */
export async function commitTree(root: string, tree: string, parent: string | null, message: string, date: string): Promise<string> {
  return out(root, ["commit-tree", tree, ...(parent ? ["-p", parent] : []), "-m", message], {
    env: { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date },
  });
}

export async function treeOf(root: string, rev: string): Promise<string> {
  return out(root, ["rev-parse", "--verify", `${rev}^{tree}`]);
}

export interface TreeChange {
  path: string;
  oldMode: string;
  newMode: string;
  oldSha: string;
  newSha: string;
}

/** What differs between two trees, path by path, by git's plumbing (no renames, no drivers, no textconv). */
export async function treeDiff(root: string, a: string, b: string): Promise<TreeChange[]> {
  if (a === b) return [];
  const f = zsplit((await git(root, ["diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", a, b])).stdout);
  const changes: TreeChange[] = [];
  for (let i = 0; i + 1 < f.length; i += 2) {
    const [oldMode, newMode, oldSha, newSha] = f[i]!.slice(1).split(" ") as [string, string, string, string];
    changes.push({ path: f[i + 1]!, oldMode, newMode, oldSha, newSha });
  }
  return changes;
}
