// The agent's conversation moves with the work. Offload finds the newest
// local Claude Code and Codex conversation that ran in the repository,
// rewrites it for the box (paths, and secrets redacted), puts it where the
// box's CLI keeps its own, and leaves a hand-over file the harness reads: the
// box's agent resumes that conversation, or, with none, starts with the
// hand-over note. Bring-back reads the box's conversations out (untrusted:
// bounded, every line checked), rewrites them for this machine and writes
// them beside the local ones, under a fresh id when the id is taken: a local
// transcript is never overwritten. Everything goes through the daemon API.
import { lstatSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { type BroughtConversation, type CarriedConversation, check, firstError, HANDOVER_PATH, Handover, HutchError } from "@hutch/shared";
import type { DaemonClient } from "../../client/daemon.ts";
import { sendDir, sh } from "../box.ts";
import { git } from "../git.ts";
import {
  boxStores,
  claudeProject,
  type ConversationAgent,
  findLocal,
  localStores,
  type LocalStores,
  piProject,
  relativeCwd,
} from "./stores.ts";
import { daemonFinder, redactedNote, redactStored } from "./stored.ts";
import { parseJsonl, type PathMap, rewrite, secretValues, sha256, TRANSCRIPT_MAX, toJsonl } from "./transcript.ts";
import { env } from "../../env.ts";
import { count } from "@hutch/shared/text";

export { CONVERSATION_AGENTS, type ConversationAgent } from "./stores.ts";

/** A conversation offload carried into the box (kept in the offload record). */

/** A box conversation written home (kept in the record, so the same one is not written twice). */
export type { BroughtConversation, CarriedConversation };

export interface CarryInput {
  box: string;
  root: string;
  guestDir: string;
  offloadId: string;
  branch: string;
  base: string;
  workTree: string;
  heldBack: string[];
  note?: string;
  env?: Record<string, string | undefined>;
}

export interface CarryResult {
  conversations: CarriedConversation[];
  /** The first input of a fresh conversation in the box (used by agents with nothing carried). */
  note: string;
  notes: string[];
}

export const NOTE_MAX = 8 * 1024;
export const AGENT_TITLE: Record<ConversationAgent, string> = { claude: "Claude Code", codex: "Codex", pi: "pi" };
/** At most this much of a held-back file is read for the secrets to redact. */
const HELD_READ_MAX = 256 * 1024;
const ENV_SECRET = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)/i;

/** What an --note says is checked before anything moves. */
export function checkNote(note: string | undefined): void {
  if (note !== undefined && note.length > NOTE_MAX)
    throw new HutchError(
      "invalid",
      `--note is ${note.length} characters; at most ${NOTE_MAX}`,
      "shorten it, or put the details in a file in the repository",
    );
}

/** What an offload would carry, for --dry-run (nothing leaves). */
export async function wouldCarry(root: string, vars?: Record<string, string | undefined>): Promise<string[]> {
  const found = await findLocal(root, localStores(vars));
  if (!found.length) return ["no local Claude Code, Codex or pi conversation ran here: the box's agent starts with the hand-over note"];
  return found.map(
    (f) =>
      `would carry the ${AGENT_TITLE[f.agent]} conversation ${f.id} (${count(f.bytes, "byte")}, from ${f.cwd}); known secrets are redacted before it leaves`,
  );
}

/** Values to redact: what the held-back files hold (a `.env`, a key), wherever they turn up in a transcript. */
async function heldBackSecrets(root: string, heldBack: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of heldBack) {
    const st = lstatSync(join(root, p), { throwIfNoEntry: false });
    if (st?.isFile()) out.push(...secretValues(await Bun.file(join(root, p)).slice(0, HELD_READ_MAX).text()));
  }
  return out;
}

/** The hand-over note: the user's --note, the branch, the recent commits and the uncommitted diffstat. */
async function handoverNote(i: CarryInput): Promise<string> {
  const log = (await git(i.root, ["log", "-10", "--format=%h %s", i.base])).stdout.trimEnd();
  const stat = (await git(i.root, ["diff", "--stat=100", "--no-color", i.base, i.workTree])).stdout
    .trimEnd()
    .split("\n")
    .slice(-40)
    .join("\n");
  return [
    "[hutch] This work was handed over from another machine by `hutch offload`; no earlier conversation came with it.",
    ...(i.note ? [`Note from the user: ${i.note}`] : []),
    `The repository is ${i.guestDir}, on branch ${i.branch} at ${i.base.slice(0, 12)}.`,
    `Recent commits:\n${log || "(none)"}`,
    `Uncommitted changes carried with it (staged and unstaged, against ${i.base.slice(0, 12)}):\n${stat || "(none)"}`,
  ].join("\n");
}

/** Reads the box's HOME (the agents' stores are under it). */
export async function boxHome(d: DaemonClient, box: string): Promise<string> {
  return checkHome((await sh(d, box, 'printf "%s\\n" "$HOME"', [], "reading the box's home")).stdout.trim(), box);
}

/** A HOME the box printed: an absolute path, one line, no `..`. */
export function checkHome(home: string, box: string): string {
  if (!/^\/[^\n\0]*$/.test(home) || home.includes("/../"))
    throw new HutchError(
      "failed",
      `box ${box} answered its HOME with something else`,
      `look inside: hutch exec ${box} -- sh -c 'echo $HOME'`,
    );
  return home;
}

/** Path prefixes from one machine's stores and repository to the other's. */
export const pathMaps = (
  agent: ConversationAgent,
  from: LocalStores,
  to: LocalStores,
  fromCwd: string,
  toCwd: string,
  roots: [string[], string],
): PathMap[] => [
  ...(agent === "claude"
    ? [{ from: `${from.claude}/projects/${claudeProject(fromCwd)}`, to: `${to.claude}/projects/${claudeProject(toCwd)}` }]
    : agent === "pi"
      ? [{ from: `${from.pi}/sessions/--${piProject(fromCwd)}--`, to: `${to.pi}/sessions/--${piProject(toCwd)}--` }]
      : []),
  { from: from[agent], to: to[agent] },
  ...roots[0].map((r) => ({ from: r, to: roots[1] })),
];

/**
 * Offload's part: the newest local conversation of each CLI, rewritten for the
 * box, and the hand-over file, sent into the box's agent stores. Idempotent
 * (a rerun overwrites the box's copies with the same content).
 */
export async function carryConversations(d: DaemonClient, i: CarryInput, progress: (s: string) => void = () => {}): Promise<CarryResult> {
  const vars = i.env ?? env.all();
  const local = localStores(vars);
  const home = await boxHome(d, i.box);
  const box = boxStores(home);
  const roots = [...new Set([i.root, realpathSync(i.root)])];
  // And this environment's credential-looking variables (the local agent's own API key among them).
  // Paths are left out (SSH_AUTH_SOCK, XAUTHORITY): they are no secret, and redacting one could eat the repository's path.
  const fromEnv = Object.entries(vars).flatMap(([k, v]) => (v && v.length >= 12 && ENV_SECRET.test(k) && !v.startsWith("/") ? [v] : []));
  const secrets = [...(await heldBackSecrets(i.root, i.heldBack)), ...fromEnv];
  const notes: string[] = [];
  const conversations: CarriedConversation[] = [];
  const tmp = mkdtempSync(join(tmpdir(), "hutch-conv-"));
  try {
    for (const f of await findLocal(i.root, local)) {
      const name = AGENT_TITLE[f.agent];
      if (f.bytes > TRANSCRIPT_MAX) {
        notes.push(
          `the local ${name} conversation ${f.id} is ${f.bytes} bytes (over ${TRANSCRIPT_MAX}): not carried; the box's ${f.agent} starts with the hand-over note`,
        );
        continue;
      }
      const parsed = parseJsonl(await Bun.file(f.path).text(), true);
      if ("problem" in parsed) {
        notes.push(`the local ${name} conversation ${f.id} is not JSONL (${parsed.problem}): not carried`);
        continue;
      }
      const rel = relativeCwd(f.cwd, roots)!;
      const cwd = rel ? `${i.guestDir}/${rel}` : i.guestDir;
      // The daemon's stored secrets too: the box must never see a value the broker keeps from it.
      const stored = await redactStored(parsed.records, daemonFinder(d));
      const said = redactedNote(stored.counts, `the ${name} conversation before it left`);
      if (said) notes.push(said);
      const out = rewrite(stored.records, { paths: pathMaps(f.agent, local, box, f.cwd, cwd, [roots, i.guestDir]), secrets, tokens: true });
      const text = toJsonl(out.records);
      const dest =
        f.agent === "claude"
          ? join(tmp, ".claude", "projects", claudeProject(cwd), `${f.id}.jsonl`)
          : f.agent === "pi"
            ? join(tmp, ".pi", "agent", "sessions", `--${piProject(cwd)}--`, basename(f.path))
            : join(tmp, ".codex", "sessions", ...f.path.split("/").slice(-4));
      mkdirSync(dirname(dest), { recursive: true });
      writeFileSync(dest, text, { mode: 0o600 });
      conversations.push({
        agent: f.agent,
        id: f.id,
        local: f.path,
        localCwd: f.cwd,
        cwd,
        bytes: Buffer.byteLength(text),
        sha256: sha256(text),
        redacted: out.redacted + Object.values(stored.counts).reduce((a, n) => a + n, 0),
      });
      if (out.redacted)
        notes.push(`${out.redacted} secret${out.redacted === 1 ? "" : "s"} redacted from the ${name} conversation before it left`);
    }
    const note = await handoverNote(i);
    const handover = {
      version: 1 as const,
      offload: i.offloadId,
      workdir: i.guestDir,
      note,
      conversations: Object.fromEntries(conversations.map((c) => [c.agent, { id: c.id, cwd: c.cwd }])),
    };
    if (!check(Handover, handover))
      throw new HutchError(
        "invalid",
        `the hand-over for box ${i.box} is not valid: ${firstError(Handover, handover)}`,
        "shorten --note, or report this as a bug",
      );
    mkdirSync(join(tmp, dirname(HANDOVER_PATH)), { recursive: true });
    writeFileSync(join(tmp, HANDOVER_PATH), JSON.stringify(handover), { mode: 0o600 });
    progress(
      conversations.length ? `carrying the ${conversations.map((c) => c.agent).join(" and ")} conversation` : "leaving the hand-over note",
    );
    const guestIn = `/workspace/.hutch-in-conv-${i.offloadId}`;
    await sh(d, i.box, 'rm -rf "$1"', [guestIn], "clearing an earlier attempt");
    await sendDir(d, i.box, tmp, guestIn);
    await sh(d, i.box, 'set -eu; umask 077; cp -R "$1/." "$HOME/"; rm -rf "$1"', [guestIn], "placing the conversation");
    return { conversations, note, notes };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
