// Bring-back's part: the box's conversations for the repository come out
// through the safe unpacker, each is checked (a plain file, bounded, every
// line one JSON object, its id a UUID, its cwd inside the repository in the
// box), rewritten for this machine, and written by hutch beside the local
// CLI's own, exclusively: an id already taken here gets a fresh one, so
// nothing local is ever overwritten. One the box did not change, or one
// already brought home, is skipped.
import { linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { DaemonClient } from "../../client/daemon.ts";
import { fetchDir, sh } from "../box.ts";
import type { OffloadRecord } from "../record.ts";
import { type BroughtConversation, checkHome, pathMaps } from "./index.ts";
import {
  boxCwd,
  boxStores,
  claudeCwd,
  claudeProject,
  CONVERSATION_AGENTS,
  type ConversationAgent,
  codexHas,
  codexMeta,
  isUuid,
  localStores,
  PI_SESSION,
  piHas,
  piMeta,
  piProject,
  piSessionName,
  rolloutDate,
  rolloutName,
} from "./stores.ts";
import { daemonFinder, redactedNote, redactStored } from "./stored.ts";
import { parseJsonl, type Records, rewrite, sha256, TRANSCRIPT_MAX, toJsonl } from "./transcript.ts";
import { HutchError } from "@hutch/shared";

/** Box transcripts looked at per CLI, and their total size. */
const BOX_FILES_MAX = 100;
const BOX_TOTAL_MAX = 256 * 1024 * 1024;

// In the box: copies of its Claude Code transcripts for the repository's
// project directories ($2, and those below it), of its pi sessions for the
// same ($4), and of its Codex rollouts, into $1; prints $HOME. Symlinks are
// not followed.
const EXPORT = `set -eu
out=$1 project=$2 max=$3 pi=$4
rm -rf "$out"; mkdir -p "$out/claude" "$out/codex" "$out/pi"
n=0
for p in "$HOME/.claude/projects/$project" "$HOME/.claude/projects/$project"-*; do
  [ -d "$p" ] && [ ! -L "$p" ] || continue
  for f in "$p"/*.jsonl; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    n=$((n+1)); [ "$n" -le "$max" ] || break
    cp "$f" "$out/claude/$n-$(basename "$f")"
  done
done
n=0
for p in "$HOME/.pi/agent/sessions/--$pi"-*; do
  [ -d "$p" ] && [ ! -L "$p" ] || continue
  for f in "$p"/*.jsonl; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    n=$((n+1)); [ "$n" -le "$max" ] || break
    cp "$f" "$out/pi/$n-$(basename "$f")"
  done
done
if [ -d "$HOME/.codex/sessions" ] && [ ! -L "$HOME/.codex/sessions" ]; then
  find "$HOME/.codex/sessions" -type f -name 'rollout-*.jsonl' | head -n "$max" | while IFS= read -r f; do cp "$f" "$out/codex/"; done
fi
printf '%s\\n' "$HOME"
`;

/** The command that continues a conversation here, per CLI. */
const RESUME: Record<ConversationAgent, (id: string) => string> = {
  claude: (id) => `claude --resume ${id}`,
  codex: (id) => `codex resume ${id}`,
  pi: (id) => `pi --session ${id}`,
};

export interface HomeResult {
  conversations: BroughtConversation[];
  notes: string[];
}

/** Writes text as path only if nothing is there: a temporary file linked into place (link fails on an existing name). */
function writeExclusive(path: string, text: string): boolean {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.hutch-${crypto.randomUUID().slice(0, 8)}`;
  writeFileSync(tmp, text, { mode: 0o600, flag: "wx" });
  try {
    linkSync(tmp, path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    unlinkSync(tmp);
  }
}

interface Candidate {
  agent: ConversationAgent;
  file: string;
  /** Its name in the box, its id there, and the rollout's start time (Codex). */
  name: string;
  id: string;
  started?: Date;
}

function candidates(dir: string): { list: Candidate[]; notes: string[] } {
  const list: Candidate[] = [];
  const notes: string[] = [];
  let total = 0;
  for (const agent of CONVERSATION_AGENTS) {
    let names: string[] = [];
    try {
      names = readdirSync(join(dir, agent)).slice(0, BOX_FILES_MAX);
    } catch {
      continue;
    }
    for (const n of names) {
      const file = join(dir, agent, n);
      const st = lstatSync(file, { throwIfNoEntry: false });
      // The box's name for it: claude and pi copies carry a counter prefix (two directories may hold the same name).
      const name = agent === "codex" ? n : n.replace(/^\d+-/, "");
      const id = (agent === "claude" ? /^([0-9a-f-]{36})\.jsonl$/ : agent === "pi" ? PI_SESSION : /-([0-9a-f-]{36})\.jsonl$/).exec(name)?.[
        agent === "pi" ? 2 : 1
      ];
      const started = agent === "codex" ? rolloutDate(n) : undefined;
      if (!st?.isFile() || !id || !isUuid(id) || started === null) {
        notes.push(`the box sent ${agent}/${n}, which is not a transcript: skipped`);
        continue;
      }
      if (st.size > TRANSCRIPT_MAX || total + st.size > BOX_TOTAL_MAX) {
        notes.push(`the box's ${agent} conversation ${id} is too big (${st.size} bytes): left in the box`);
        continue;
      }
      total += st.size;
      list.push({ agent, file, name, id, ...(started ? { started } : {}) });
    }
  }
  return { list, notes };
}

/** The first cwd a record names (Claude Code's on every record, Codex's turn contexts) that `..` takes out of the repository. */
function leavingCwd(records: Records, guestDir: string): string | null {
  for (const r of records) {
    const p = r.payload as Record<string, unknown> | undefined;
    for (const cwd of [r.cwd, p && typeof p === "object" ? p.cwd : undefined]) {
      if (typeof cwd !== "string") continue;
      const w = boxCwd(cwd, guestDir);
      if (w && "leaves" in w) return w.leaves;
    }
  }
  return null;
}

/**
 * The box's conversations for the repository, written home. Mutates and
 * returns the record's list of what was brought (the caller writes the record).
 */
export async function bringConversationsHome(
  d: DaemonClient,
  rec: OffloadRecord,
  root: string,
  opts: { dryRun?: boolean; env?: Record<string, string | undefined> } = {},
  progress: (s: string) => void = () => {},
): Promise<HomeResult> {
  const local = localStores(opts.env);
  const outDir = `/workspace/.hutch-conv-out-${rec.id}`;
  progress(`reading box ${rec.box}'s conversations`);
  const said = await sh(
    d,
    rec.box,
    EXPORT,
    [outDir, claudeProject(rec.guestDir), String(BOX_FILES_MAX), piProject(rec.guestDir)],
    "collecting the box's conversations",
  );
  const home = checkHome(said.stdout.trim(), rec.box);
  const box = boxStores(home);
  const tmp = mkdtempSync(join(tmpdir(), "hutch-conv-back-"));
  const notes: string[] = [];
  const conversations: BroughtConversation[] = [];
  try {
    // Bounded as it arrives: the per-file checks below come after the bytes are here.
    await fetchDir(d, rec.box, outDir, join(tmp, "out"), { maxBytes: BOX_TOTAL_MAX, maxEntries: 4 * BOX_FILES_MAX });
    await sh(d, rec.box, 'rm -rf "$1"', [outDir], "cleaning up");
    const found = candidates(join(tmp, "out"));
    notes.push(...found.notes);
    const find = daemonFinder(d);
    const seen = new Set([...(rec.conversations ?? []).map((c) => c.sha256), ...(rec.conversationsHome ?? []).map((c) => c.sha256)]);
    const roots = [...new Set([root, realpathSync(root)])];
    // Read and checked whole before anything is written: one transcript whose cwd leaves the repository refuses them all.
    const read = async (c: Candidate) => {
      const text = await Bun.file(c.file).text();
      const sum = sha256(text);
      // What was carried, unchanged, or what an earlier bring-back already wrote here.
      if (seen.has(sum)) return null;
      const parsed = parseJsonl(text);
      if ("problem" in parsed) return { c, problem: parsed.problem };
      const meta =
        c.agent === "claude"
          ? { id: c.id, cwd: claudeCwd(parsed.records) }
          : c.agent === "pi"
            ? piMeta(parsed.records)
            : codexMeta(parsed.records);
      const where = meta?.cwd ? boxCwd(meta.cwd, rec.guestDir) : null;
      const leaves = where && "leaves" in where ? where.leaves : leavingCwd(parsed.records, rec.guestDir);
      if (leaves !== null)
        throw new HutchError(
          "denied",
          `the box's ${c.agent} conversation ${c.id} says it ran in ${leaves}, outside the repository ${rec.guestDir} once its .. is resolved; nothing was brought back`,
          `remove it in the box (hutch exec ${rec.box} -- sh), then rerun: hutch bring-back ${rec.box}`,
        );
      return { c, sum, parsed, meta, rel: where && "rel" in where ? where.rel : null };
    };
    for (const c of found.list) await read(c);
    for (const c of found.list) {
      const got = await read(c);
      if (!got) continue;
      if ("problem" in got) {
        notes.push(`the box's ${c.agent} conversation ${c.id} is not JSONL (${got.problem}): left in the box`);
        continue;
      }
      const { sum, parsed, meta, rel } = got;
      // Another project's conversation (or none at all): not this repository's to bring.
      if (!meta || meta.id !== c.id || rel === null) continue;
      const localCwd = rel ? `${root}/${rel}` : root;
      // Each CLI's own kind of id: Claude Code's are random, Codex's and pi's time-ordered (v7).
      const fresh = c.agent === "claude" ? crypto.randomUUID() : Bun.randomUUIDv7();
      const claudeFile = (id: string) => join(local.claude, "projects", claudeProject(localCwd), `${id}.jsonl`);
      const taken =
        c.agent === "claude"
          ? lstatSync(claudeFile(c.id), { throwIfNoEntry: false }) !== undefined
          : c.agent === "pi"
            ? piHas(local.pi, c.id)
            : codexHas(join(local.codex, "sessions"), c.id);
      const id = taken ? fresh : c.id;
      // The daemon's stored secrets first, by name, before anything of this conversation is written.
      const stored = await redactStored(parsed.records, find);
      const said = redactedNote(stored.counts, `the box's ${c.agent} conversation ${c.id}`);
      if (said) notes.push(said);
      const out = rewrite(stored.records, {
        paths: pathMaps(c.agent, box, local, meta.cwd!, localCwd, [[rec.guestDir], roots[0]!]),
        ...(taken ? { ids: [[c.id, id]] as [string, string][] } : {}),
      });
      let path: string;
      if (c.agent === "claude") path = claudeFile(id);
      else if (c.agent === "pi")
        path = join(
          local.pi,
          "sessions",
          `--${piProject(localCwd)}--`,
          taken ? piSessionName(new Date(), id) : c.file.split("/").at(-1)!.replace(/^\d+-/, ""),
        );
      else {
        const n = rolloutName(taken ? new Date() : c.started!, id);
        path = join(local.codex, "sessions", ...n.dir, n.name);
      }
      const brought: BroughtConversation = {
        agent: c.agent,
        boxId: c.id,
        id,
        path,
        cwd: localCwd,
        sha256: sum,
        resume: RESUME[c.agent](id),
      };
      if (!opts.dryRun && !writeExclusive(path, toJsonl(out.records))) {
        notes.push(
          `${path} appeared while hutch wrote it: the box's ${c.agent} conversation ${c.id} was not written; rerun the bring-back`,
        );
        continue;
      }
      conversations.push(brought);
      seen.add(sum);
    }
    if (!opts.dryRun) rec.conversationsHome = [...(rec.conversationsHome ?? []), ...conversations];
    return { conversations, notes };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
