// Grading one worker: what the check may not be edited through (the protect
// globs), the score convention, and the check run with its output bounded.
// Everything here reads box output, which is untrusted: it is cut to a tail
// and parsed, never run on the host.
import { HutchError, type SnapshotChange } from "@hutch/shared";
import { execIn } from "../box/exec.ts";
import type { Channel } from "../engine/channel.ts";

/** What is restored from the base before grading unless --protect says more: the usual homes of tests. */
export const DEFAULT_PROTECT = ["**/test/**", "**/tests/**", "**/__tests__/**", "**/*.test.*", "**/*.spec.*", "**/*_test.*", "**/test_*"];

/** The check's last bytes kept (what a verdict shows). */
export const TAIL_BYTES = 4096;

/** What makes a word of the check a script it runs rather than data it reads (answer.txt is the worker's to change). */
const SCRIPT = /^\.\/|\.(sh|bash|py|js|mjs|cjs|ts|mts|rb|pl|php|lua)$/;

/** The scripts the check names (`sh check.sh`, `./grade`, `bun test a.test.ts`): relative paths, protected as the check's own files. */
export function checkFiles(check: string): string[] {
  return check
    .split(/[\s;&|()<>]+/)
    .map((t) => t.replace(/^["']|["']$/g, ""))
    .filter((t) => t && !t.startsWith("-") && !t.startsWith("/") && !t.includes("..") && /^[\w./-]+$/.test(t) && SCRIPT.test(t))
    .map((t) => t.replace(/^\.\//, ""));
}

export function protectGlobs(check: string, extra: string[] = []): string[] {
  return [...new Set([...DEFAULT_PROTECT, ...checkFiles(check), ...extra])];
}

/** A snapshot path (`workspace/a/b`, `home/x`) as a path under workdir (`a/b`), or null when it lies elsewhere. */
export function underWorkdir(snapPath: string, workdir: string): string | null {
  const [top, ...rest] = snapPath.split("/");
  const guestRoot = top === "workspace" ? "/workspace" : top === "home" ? "/home/hutch" : null;
  if (!guestRoot) return null;
  const abs = [guestRoot, ...rest].join("/");
  const root = workdir.replace(/\/+$/, "");
  return abs.startsWith(`${root}/`) ? abs.slice(root.length + 1) : null;
}

/**
 * The snapshot path of the work dir (`/workspace/calc` → `workspace/calc`):
 * the one part of a worker's box that reaches its grading box. It must lie in
 * what a snapshot holds, and be less than the whole home, whose startup files
 * (a `.pth`, a `.bashrc`, a tool early on PATH) would run in the check.
 */
export function workTree(workdir: string): string {
  const parts = workdir.split("/").filter((p) => p !== "" && p !== ".");
  const bad = (why: string) =>
    new HutchError(
      "invalid",
      `workdir ${JSON.stringify(workdir)} ${why}`,
      "give /workspace or a directory under it (the default: /workspace)",
    );
  if (parts.includes("..")) throw bad('has a ".." component');
  if (parts[0] === "workspace") return parts.join("/");
  if (parts[0] === "home" && parts[1] === "hutch" && parts.length > 2) return ["home", ...parts.slice(2)].join("/");
  throw bad("is not under /workspace or /home/hutch/, the parts of a box a snapshot keeps");
}

/** The changes of a worker's result that touch protected files: what to restore and what to remove before grading. */
export function protectedChanges(changes: SnapshotChange[], workdir: string, globs: string[]): { restore: string[]; remove: string[] } {
  const matchers = globs.map((g) => new Bun.Glob(g));
  const restore: string[] = [];
  const remove: string[] = [];
  for (const c of changes) {
    const rel = underWorkdir(c.path, workdir);
    // A metadata-only change (a fork's fresh mtimes) changes nothing a check reads.
    if (rel === null || c.change === "metadata" || !matchers.some((m) => m.match(rel))) continue;
    if (c.change === "added") remove.push(`${workdir.replace(/\/+$/, "")}/${rel}`);
    else restore.push(c.path);
  }
  return { restore, remove };
}

/** The worker's files as they differ from the base: the text patch kept for losers, and its stat. */
export function diffOf(
  changes: SnapshotChange[],
  workdir: string,
): { text: string; stat: { files: number; added: number; removed: number } } {
  let text = "";
  const stat = { files: 0, added: 0, removed: 0 };
  for (const c of changes) {
    const rel = underWorkdir(c.path, workdir);
    if (rel === null || c.type === "dir" || c.change === "metadata" || rel === ".git" || rel.startsWith(".git/") || rel.includes("/.git/"))
      continue;
    stat.files++;
    if (c.patch) {
      text += c.patch.endsWith("\n") ? c.patch : `${c.patch}\n`;
      for (const line of c.patch.split("\n")) {
        if (line.startsWith("+") && !line.startsWith("+++")) stat.added++;
        else if (line.startsWith("-") && !line.startsWith("---")) stat.removed++;
      }
    } else text += `${c.change} ${c.path}${c.binary ? ` (binary, ${c.binary.before} -> ${c.binary.after} bytes)` : ""}\n`;
  }
  return { text, stat };
}

/** The score a check prints: its last line of the form `score: N` (N a finite number), or null. */
export function parseScore(output: string): number | null {
  const m = [...output.matchAll(/^score:\s*(-?\d+(?:\.\d+)?)\s*$/gm)].at(-1);
  const n = m ? Number(m[1]) : Number.NaN;
  return Number.isFinite(n) ? n : null;
}

export interface CheckRun {
  exit: number | null;
  tail: string;
  timedOut: boolean;
}

/** Runs the check in the grading box, its stdout and stderr interleaved into one bounded tail; stopped at timeoutMs. */
export async function runCheck(
  channel: Channel,
  check: string,
  workdir: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<CheckRun> {
  const dec = new TextDecoder();
  let tail = "";
  const run = execIn(
    channel,
    { tool: "exec", argv: ["sh", "-c", check], cwd: workdir },
    {
      onData: (_chan, bytes) => {
        tail = (tail + dec.decode(bytes, { stream: true })).slice(-TAIL_BYTES);
      },
    },
  );
  let timedOut = false;
  const stop = () => {
    run.stream.close();
  };
  const timer = setTimeout(() => {
    timedOut = true;
    stop();
  }, timeoutMs);
  signal.addEventListener("abort", stop, { once: true });
  try {
    const end = await run.done;
    return { exit: timedOut ? null : (end.exit?.code ?? null), tail, timedOut };
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", stop);
  }
}
