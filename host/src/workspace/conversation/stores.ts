// Where each agent CLI keeps its conversations, read from the installed
// versions (Claude Code 2.1.332, Codex 0.171.0) and tried against the fake
// model API:
//   Claude Code: $CLAUDE_CONFIG_DIR (default ~/.claude)/projects/<cwd with
//     every non-alphanumeric as "-">/<session uuid>.jsonl; records carry
//     `cwd` and `sessionId`; `claude --resume <uuid>` (run in that cwd) loads
//     it and appends to the same file.
//   Codex: $CODEX_HOME (default ~/.codex)/sessions/YYYY/MM/DD/
//     rollout-<YYYY-MM-DDTHH-MM-SS>-<uuid>.jsonl, the first record a
//     session_meta with payload {id, cwd}; `codex exec resume <uuid>` finds
//     it by its file name (no sqlite index needed) and appends to it.
//   pi: $PI_CODING_AGENT_DIR (default ~/.pi/agent)/sessions/--<cwd without
//     its leading "/", every "/" as "-">--/<time>_<uuid>.jsonl, the first
//     record {type: "session", id, cwd}; `pi --session <uuid>` resumes it,
//     appending to the same file.
import { lstatSync, readdirSync, realpathSync } from "node:fs";
import { join, posix } from "node:path";
import { parseJsonl, type Records } from "./transcript.ts";
import { env } from "../../env.ts";

export type ConversationAgent = "claude" | "codex" | "pi";
export const CONVERSATION_AGENTS: ConversationAgent[] = ["claude", "codex", "pi"];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const isUuid = (s: string) => UUID.test(s);
/** How Claude Code names a project's directory after its cwd. */
export const claudeProject = (cwd: string) => cwd.replace(/[^A-Za-z0-9]/g, "-");
/** How pi names a cwd's session directory (without the surrounding "--"). */
export const piProject = (cwd: string) => cwd.replace(/^[/\\]/, "").replace(/[/\\:]/g, "-");
/** A pi session file: `<ISO time, ":" and "." as "-">_<uuid>.jsonl`. */
export const PI_SESSION = /^(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)_([0-9a-f-]{36})\.jsonl$/;
export const piSessionName = (at: Date, id: string) => `${at.toISOString().replace(/[:.]/g, "-")}_${id}.jsonl`;
const ROLLOUT = /^rollout-(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})-([0-9a-f-]{36})\.jsonl$/;

/** Candidates looked at per CLI, newest first: enough for any one project, bounded for a store of years. */
const SCAN_MAX = 400;
/** What is read of a transcript to learn its cwd. */
const HEAD_BYTES = 1024 * 1024;

export interface LocalStores {
  claude: string;
  codex: string;
  /** pi's agent directory (its sessions are under sessions/). */
  pi: string;
}

/** The local CLIs' stores, as the CLIs themselves find them. */
export function localStores(vars?: Record<string, string | undefined>): LocalStores {
  return env.agentStores(vars);
}

/** The box's stores under its user's HOME (the harness sets no CLAUDE_CONFIG_DIR or CODEX_HOME there). */
export const boxStores = (home: string): LocalStores => ({ claude: `${home}/.claude`, codex: `${home}/.codex`, pi: `${home}/.pi/agent` });

export interface Found {
  agent: ConversationAgent;
  id: string;
  path: string;
  /** Where the conversation ran. */
  cwd: string;
  bytes: number;
  mtimeMs: number;
}

const inside = (dir: string, roots: string[]) => roots.some((r) => dir === r || dir.startsWith(`${r}/`));

function files(dir: string, filter: (name: string) => boolean): { path: string; mtimeMs: number; bytes: number }[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: { path: string; mtimeMs: number; bytes: number }[] = [];
  for (const n of names) {
    if (!filter(n)) continue;
    const st = lstatSync(join(dir, n), { throwIfNoEntry: false });
    // A symlink is not followed: hutch carries the CLI's own files, not what they point to.
    if (st?.isFile()) out.push({ path: join(dir, n), mtimeMs: st.mtimeMs, bytes: st.size });
  }
  return out;
}

async function head(path: string): Promise<Records> {
  const text = await Bun.file(path).slice(0, HEAD_BYTES).text();
  const lines = text.split("\n");
  // The last line may be cut by the slice.
  if (text.length >= HEAD_BYTES) lines.pop();
  const r = parseJsonl(lines.join("\n"), true);
  return "records" in r ? r.records : [];
}

/** The cwd a Claude Code transcript ran in: the first record that names one. */
export function claudeCwd(records: Records): string | null {
  for (const r of records) if (typeof r.cwd === "string") return r.cwd;
  return null;
}

/** A pi session's id and cwd, from its header record. */
export function piMeta(records: Records): { id: string; cwd: string } | null {
  const h = records[0];
  return h?.type === "session" && typeof h.id === "string" && typeof h.cwd === "string" ? { id: h.id, cwd: h.cwd } : null;
}

/** Whether a local pi session directory already holds conversation `id` (`pi --session` looks across them). */
export const piHas = (agentDir: string, id: string) =>
  safeDirs(join(agentDir, "sessions"), /^--.*--$/).some((d) => files(d, (n) => n.endsWith(`_${id}.jsonl`)).length > 0);

/** A Codex rollout's id and cwd, from its session_meta record. */
export function codexMeta(records: Records): { id: string; cwd: string } | null {
  const first = records[0];
  const p = first?.type === "session_meta" ? (first.payload as Record<string, unknown> | undefined) : undefined;
  return p && typeof p.id === "string" && typeof p.cwd === "string" ? { id: p.id, cwd: p.cwd } : null;
}

/** Every rollout file under a Codex sessions directory (YYYY/MM/DD), newest first, at most `max`. */
export function codexRollouts(sessions: string, max = SCAN_MAX): { path: string; mtimeMs: number; bytes: number }[] {
  const out: { path: string; mtimeMs: number; bytes: number }[] = [];
  for (const y of safeDirs(sessions, /^\d{4}$/))
    for (const m of safeDirs(y, /^\d{2}$/)) for (const d of safeDirs(m, /^\d{2}$/)) out.push(...files(d, (n) => ROLLOUT.test(n)));
  return out.sort((a, b) => b.mtimeMs - a.mtimeMs).slice(0, max);
}

function safeDirs(dir: string, name: RegExp): string[] {
  try {
    return readdirSync(dir)
      .filter((n) => name.test(n) && lstatSync(join(dir, n)).isDirectory())
      .map((n) => join(dir, n));
  } catch {
    return [];
  }
}

/** Whether a local rollout already holds conversation `id` (every day is looked at, not only the newest). */
export const codexHas = (sessions: string, id: string) => codexRollouts(sessions, Infinity).some((f) => f.path.endsWith(`-${id}.jsonl`));

/** The newest local conversation of each CLI that ran in the repository (at its root or below it). */
export async function findLocal(root: string, stores: LocalStores): Promise<Found[]> {
  const roots = [...new Set([root, realpathSync(root)])];
  const found: Found[] = [];

  const projects = join(stores.claude, "projects");
  const prefixes = roots.map(claudeProject);
  const dirs = safeDirs(projects, /./).filter((d) => {
    const n = d.slice(projects.length + 1);
    return prefixes.some((p) => n === p || n.startsWith(`${p}-`));
  });
  const claude = dirs
    .flatMap((d) => files(d, (n) => n.endsWith(".jsonl") && isUuid(n.slice(0, -6))))
    .sort((a, b) => b.mtimeMs - a.mtimeMs)
    .slice(0, SCAN_MAX);
  for (const f of claude) {
    const cwd = claudeCwd(await head(f.path));
    if (cwd && inside(cwd, roots)) {
      found.push({ agent: "claude", id: f.path.split("/").at(-1)!.slice(0, -6), path: f.path, cwd, bytes: f.bytes, mtimeMs: f.mtimeMs });
      break;
    }
  }

  const piSessions = join(stores.pi, "sessions");
  const piPrefixes = roots.map((r) => `--${piProject(r)}`);
  const pi = safeDirs(piSessions, /^--.*--$/)
    .filter((d) => {
      const n = d.slice(piSessions.length + 1);
      return piPrefixes.some((p) => n === `${p}--` || n.startsWith(`${p}-`));
    })
    .flatMap((d) => files(d, (n) => PI_SESSION.test(n)))
    .sort((a, b) => b.mtimeMs - a.mtimeMs)
    .slice(0, SCAN_MAX);
  for (const f of pi) {
    const meta = piMeta(await head(f.path));
    if (meta && isUuid(meta.id) && f.path.endsWith(`_${meta.id}.jsonl`) && inside(meta.cwd, roots)) {
      found.push({ agent: "pi", id: meta.id, path: f.path, cwd: meta.cwd, bytes: f.bytes, mtimeMs: f.mtimeMs });
      break;
    }
  }

  for (const f of codexRollouts(join(stores.codex, "sessions"))) {
    const meta = codexMeta(await head(f.path));
    if (meta && isUuid(meta.id) && inside(meta.cwd, roots)) {
      found.push({ agent: "codex", id: meta.id, path: f.path, cwd: meta.cwd, bytes: f.bytes, mtimeMs: f.mtimeMs });
      break;
    }
  }
  return found;
}

/**
 * A cwd a box's transcript records, made repository-relative: normalised
 * first (`..` and `.` resolved lexically; the box's repository holds no
 * symlinks above it that hutch follows), then placed under the box's
 * repository. `null`: another project's. `{ leaves }`: it names the repository
 * but `..` takes it out (a transcript made to be written elsewhere).
 */
export function boxCwd(cwd: string, guestDir: string): { rel: string } | { leaves: string } | null {
  if (!cwd.startsWith("/")) return null;
  const rel = relativeCwd(posix.normalize(cwd).replace(/\/+$/, "") || "/", [guestDir]);
  if (rel !== null) return { rel };
  return relativeCwd(cwd, [guestDir]) !== null ? { leaves: posix.normalize(cwd) } : null;
}

/** The repository-relative part of a cwd under one of the roots ("" at the root). */
export function relativeCwd(cwd: string, roots: string[]): string | null {
  for (const r of roots) if (cwd === r) return "";
  for (const r of roots) if (cwd.startsWith(`${r}/`)) return cwd.slice(r.length + 1);
  return null;
}

/** A Codex rollout's file name for a conversation started at `at`. */
export function rolloutName(at: Date, id: string): { dir: string[]; name: string } {
  const p = (n: number) => String(n).padStart(2, "0");
  const [y, mo, d] = [String(at.getFullYear()), p(at.getMonth() + 1), p(at.getDate())];
  return {
    dir: [y, mo, d],
    name: `rollout-${y}-${mo}-${d}T${p(at.getHours())}-${p(at.getMinutes())}-${p(at.getSeconds())}-${id}.jsonl`,
  };
}

/** The date a rollout's name says it started, if the name is one. */
export function rolloutDate(name: string): Date | null {
  const m = ROLLOUT.exec(name);
  if (!m) return null;
  const [, y, mo, d, h, mi, s] = m.map(Number) as number[];
  return new Date(y!, mo! - 1, d!, h, mi, s);
}
