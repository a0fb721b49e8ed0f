// The agent's conversation moves with the work: a local Claude Code or Codex
// session (the real CLI, run on the host against the fake model API) is
// carried by `hutch offload`, the box's agent resumes it (the fake sees turn
// 1 in the box's first request), and `hutch bring-back` writes the box's
// conversation beside the local one, so the local CLI resumes it with the
// box's turn. Without a local session the box's agent starts with the
// hand-over note.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { harness } from "../../host/src/harness/index.ts";
import { agentCommand } from "../../host/src/harness/install.ts";
import type { Resume } from "../../host/src/harness/types.ts";
import { Events, read } from "../../shared/src/index.ts";
import { events, fakeBindings, newSecrets } from "../agent-turns.ts";
import { AGENTS_CACHE, hostContext, hostEnv } from "../fixtures/agents/host-run.ts";
import { type FakeModel, startFakeModel } from "../fixtures/fake-model/index.ts";
import { type Home, makeHome, newRepo, onTerminal, sha256 } from "../helpers.ts";
import { joinClient, startServer } from "../remote.ts";

const SECRETS = newSecrets();
const TOKEN = "sekrit-conversation-token-42";
let h: Home;
let fake: FakeModel;
let work: string;

beforeAll(async () => {
  h = makeHome("hutch-conv-");
  h.env.HUTCH_AGENTS_DIR = AGENTS_CACHE;
  fake = await startFakeModel();
  writeFileSync(join(h.home, "config.json"), JSON.stringify(fakeBindings(fake)));
  for (const [name, value] of Object.entries(SECRETS)) expect((await h.run(["secret", "set", name], { stdin: value })).code).toBe(0);
  const install = await h.run(["agent", "install", "claude", "codex", "pi"]);
  expect(install.code, install.stderr).toBe(0);
  work = mkdtempSync(join(tmpdir(), "hutch-conv-work-"));
}, 600_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
  rmSync(work, { recursive: true, force: true });
});

/** A repository with one commit, an uncommitted change and a held-back .env holding TOKEN. */
function repo(name: string): string {
  const dir = newRepo(join(work, name), { "parser.c": "int main(void) { return 0; }\n" }, "start the parser");
  writeFileSync(join(dir, "parser.c"), "int main(void) { return 1; }\n");
  writeFileSync(join(dir, ".env"), `API_TOKEN=${TOKEN}\n`);
  return dir;
}

/** One headless turn of the real CLI on the host, in dir, its home (config and conversations) in home. */
async function localTurn(agent: "claude" | "codex" | "pi", home: string, dir: string, prompt: string, resume: Resume = false) {
  const hs = harness(agent);
  const ctx = hostContext(hs, fake, { resume: { home, workdir: dir } });
  const proc = Bun.spawn([agentCommand(hs, AGENTS_CACHE), ...hs.headless(prompt, ctx, resume)], {
    cwd: dir,
    env: hostEnv(hs, fake, ctx),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(code, err.slice(-2000)).toBe(0);
  return out;
}

/** The local CLIs' stores as hutch finds them (their own variables, as a user's shell would have them). */
const storesEnv = (home: string) => ({
  CLAUDE_CONFIG_DIR: join(home, ".claude"),
  CODEX_HOME: join(home, ".codex"),
  PI_CODING_AGENT_DIR: join(home, ".pi", "agent"),
});
const body = (i: number) => JSON.stringify(fake.modelCalls()[i]?.body ?? null);
// A model request is tens of KiB: say what is missing, not the whole request.
const has = (text: string, s: string) => expect(text.includes(s), `the request lacks ${s}`).toBe(true);
const lacks = (text: string, s: string) => expect(text.includes(s), `the request holds ${s}`).toBe(false);

describe.each(["claude", "codex", "pi"] as const)("%s", (agent) => {
  test("the local conversation is carried, resumed in the box, brought home and resumed here with the box's turn", async () => {
    const dir = repo(`app-${agent}`);
    const home = mkdtempSync(join(tmpdir(), `hutch-conv-${agent}-home-`));
    const box = `conv-${agent}`;
    // No box beforehand: the offload makes it, and gives it the carried agent's binding (its secret is stored).

    // Turn 1, on this machine; the user pasted the token (held back as .env) into the conversation.
    fake.reset();
    await localTurn(agent, home, dir, `create hello.txt containing hi\nthe token is ${TOKEN}`);
    expect(readFileSync(join(dir, "hello.txt"), "utf8")).toBe("hi");
    has(body(0), TOKEN);

    const dry = await h.run(["offload", "--box", box, "--dry-run", "--json"], { cwd: dir, env: storesEnv(home) });
    const dryNotes = (JSON.parse(dry.stdout) as { notes: string[] }).notes.filter((n) => n.startsWith("would carry"));
    expect(dryNotes).toHaveLength(1);
    const off = await h.run(["offload", "--box", box, "--json"], { cwd: dir, env: storesEnv(home) });
    expect(off.code, off.stderr).toBe(0);
    const offloaded = JSON.parse(off.stdout) as {
      guestDir: string;
      conversations: { agent: string; id: string; cwd: string; redacted: number }[];
    };
    const carried = offloaded.conversations.find((c) => c.agent === agent);
    expect(carried).toMatchObject({ cwd: offloaded.guestDir });
    expect(carried!.redacted).toBeGreaterThan(0);
    expect(dryNotes[0]).toContain(carried!.id);
    const localFiles = () =>
      Bun.spawnSync(["find", home, "-name", "*.jsonl", "-path", agent === "claude" ? "*/projects/*" : "*/sessions/*"])
        .stdout.toString()
        .trim()
        .split("\n");
    const [original] = localFiles();
    const originalSum = sha256(readFileSync(original!));

    // Turn 2, in the box: it continues turn 1 (the fake sees it in the box's first request), rewritten for the box.
    fake.reset();
    const run = await h.run(["run", box, "--agent", agent, "--prompt", "create two.txt containing yo", "--json"]);
    expect(run.code, run.stderr + run.stdout).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, state: "idle" });
    const first = body(0);
    has(first, "create hello.txt containing hi");
    has(first, 'Created hello.txt containing \\"hi\\"');
    has(first, "create two.txt containing yo");
    has(first, offloaded.guestDir);
    lacks(first, dir);
    // The pasted token never reached the box: redacted before the conversation left.
    lacks(first, TOKEN);
    has(first, "[redacted by hutch]");
    expect((await h.run(["exec", box, "-w", offloaded.guestDir, "--", "cat", "two.txt"])).stdout).toBe("yo");
    const inBox = await h.run(["exec", box, "--", "sh", "-c", 'grep -rlF -e "$1" /workspace /home/hutch || true', "sh", TOKEN]);
    expect(inBox.stdout).toBe("");

    // Home again: the box's conversation lands beside the local one, under a fresh id; the local one is untouched.
    const back = await h.run(["bring-back", box, "--json"], { cwd: dir, env: storesEnv(home) });
    expect(back.code, back.stderr).toBe(0);
    const brought = (
      JSON.parse(back.stdout) as { conversations: { agent: string; id: string; boxId: string; path: string; cwd: string }[] }
    ).conversations;
    expect(brought).toHaveLength(1);
    expect(brought[0]).toMatchObject({ agent, boxId: carried!.id, cwd: dir });
    expect(brought[0]!.id).not.toBe(carried!.id);
    expect(existsSync(brought[0]!.path)).toBe(true);
    expect(sha256(readFileSync(original!))).toBe(originalSum);
    lacks(readFileSync(brought[0]!.path, "utf8"), offloaded.guestDir);
    expect(readFileSync(join(dir, "two.txt"), "utf8")).toBe("yo");

    // Turn 3, here: resuming the brought conversation continues with the box's turn.
    fake.reset();
    await localTurn(agent, home, dir, "create three.txt containing ok", brought[0]!.id);
    has(body(0), "create hello.txt containing hi");
    has(body(0), "create two.txt containing yo");
    has(body(0), 'Created two.txt containing \\"yo\\"');
    has(body(0), dir);
    expect(readFileSync(join(dir, "three.txt"), "utf8")).toBe("ok");

    // A second bring-back finds nothing new: the same conversation is not written twice.
    const again = await h.run(["bring-back", box, "--json"], { cwd: dir, env: storesEnv(home) });
    expect(again.code, again.stderr).toBe(0);
    expect((JSON.parse(again.stdout) as { conversations: unknown[] }).conversations).toEqual([]);
    expect(localFiles()).toHaveLength(2);
    rmSync(home, { recursive: true, force: true });
  }, 300_000);
});

test("interactive claude in the offloaded box resumes the carried conversation; the log gets only the new turn", async () => {
  // conv-claude holds the carried conversation, with the box's headless turn (the test above).
  fake.reset();
  const a = onTerminal(h, ["run", "conv-claude", "--agent", "claude"], 120, 40);
  await a.until(/session (ses_[0-9a-z]{20})/);
  const sid = /session (ses_[0-9a-z]{20})/.exec(a.text())![1]!;
  await a.until("bypass permissions on", 30_000);
  a.type("create four.txt containing tui");
  await Bun.sleep(300);
  a.type("\r");
  await a.until("create four.txt containing tui");
  a.type("\x01d");
  expect(await a.proc.exited).toBe(0);
  const wait = await h.run(["session", "wait", sid, "--json"]);
  expect(JSON.parse(wait.stdout), wait.stderr).toMatchObject({ state: "idle", ok: true });
  has(body(0), "create hello.txt containing hi");
  has(body(0), "create two.txt containing yo");
  expect((await h.run(["exec", "conv-claude", "-w", "/workspace/app-claude", "--", "cat", "four.txt"])).stdout).toBe("tui");
  const said = (await events(h, sid)).flatMap((e) => {
    const d = read(e, Events.messageCompleted);
    return d?.role === "user" ? [d.text] : [];
  });
  expect(said).toEqual(["create four.txt containing tui"]);
  await h.run(["session", "close", sid]);
}, 180_000);

test("without a local conversation the box's agent starts with the hand-over note: the note, the branch, recent commits and the diffstat", async () => {
  const dir = repo("fresh");
  const home = mkdtempSync(join(tmpdir(), "hutch-conv-empty-"));
  const box = "conv-fresh";
  expect((await h.run(["box", "create", box, "--start", "--secret", "anthropic"])).code).toBe(0);
  const off = await h.run(["offload", "--box", box, "--note", "finish the parser's error path", "--json"], {
    cwd: dir,
    env: storesEnv(home),
  });
  expect(off.code, off.stderr).toBe(0);
  expect((JSON.parse(off.stdout) as { conversations: unknown[] }).conversations).toEqual([]);

  fake.reset();
  const run = await h.run(["run", box, "--agent", "claude", "--prompt", "create notes.txt containing done", "--json"]);
  expect(run.code, run.stderr + run.stdout).toBe(0);
  const first = body(0);
  for (const s of [
    "finish the parser's error path",
    "on branch main",
    "start the parser",
    "parser.c",
    "/workspace/fresh",
    "create notes.txt containing done",
  ])
    has(first, s);
  // The log holds what the user typed; the note is the agent's input, not the user's words.
  const log = await events(h, (JSON.parse(run.stdout) as { session: string }).session);
  expect(log.filter((e) => e.kind === "input.sent").map((e) => read(e, Events.inputSent)?.text)).toEqual([
    "create notes.txt containing done",
  ]);
  expect((await h.run(["exec", box, "-w", "/workspace/fresh", "--", "cat", "notes.txt"])).stdout).toBe("done");

  // A follow-up continues that conversation (the note once, at its start), in the repository.
  const id = (JSON.parse(run.stdout) as { session: string }).session;
  expect((await h.run(["session", "driver", "acquire", id])).code).toBe(0);
  fake.reset();
  expect((await h.run(["session", "send", id, "create more.txt containing again"])).code).toBe(0);
  expect(JSON.parse((await h.run(["session", "wait", id, "--json"])).stdout)).toMatchObject({ state: "idle", ok: true });
  const followUp = body(0);
  has(followUp, "create notes.txt containing done");
  has(followUp, "finish the parser's error path");
  expect(followUp.split("finish the parser's error path").length, "the note is in the conversation once").toBe(2);
  expect((await h.run(["exec", box, "-w", "/workspace/fresh", "--", "cat", "more.txt"])).stdout).toBe("again");

  // The conversation the box started comes home under its own id (nothing local holds it).
  const back = await h.run(["bring-back", box, "--json"], { cwd: dir, env: storesEnv(home) });
  expect(back.code, back.stderr).toBe(0);
  const brought = (JSON.parse(back.stdout) as { conversations: { agent: string; id: string; boxId: string; path: string }[] })
    .conversations;
  expect(brought.map((c) => [c.agent, c.id === c.boxId])).toEqual([["claude", true]]);
  expect(brought[0]!.path).toStartWith(join(home, ".claude", "projects", dir.replace(/[^A-Za-z0-9]/g, "-")));
  has(readFileSync(brought[0]!.path, "utf8"), "create notes.txt containing done");
  rmSync(home, { recursive: true, force: true });
}, 180_000);

test("a hand-over file the box broke is refused with what to do, and the turn says so", async () => {
  const box = "conv-fresh";
  await h.run(["exec", box, "--", "sh", "-c", 'printf \'{"version":1,"workdir":"/etc"}\' > "$HOME/.hutch/handover.json"']);
  const run = await h.run(["run", box, "--agent", "claude", "--prompt", "hi", "--json"]);
  expect(run.code).toBe(1);
  const log = await events(h, (JSON.parse(run.stdout) as { session: string }).session);
  const err = log.map((e) => read(e, Events.errorRaised)).find((d) => d !== null);
  expect(err?.message).toContain("hand-over file");
  expect(err?.message).toContain("rm ~/.hutch/handover.json");
}, 120_000);

test("what a hostile box leaves in its stores is checked: malformed, foreign and linked transcripts stay in the box; a good one comes home", async () => {
  const dir = repo("hostile");
  const home = mkdtempSync(join(tmpdir(), "hutch-conv-hostile-"));
  expect((await h.run(["box", "create", "conv-hostile", "--start"])).code).toBe(0);
  const off = await h.run(["offload", "--box", "conv-hostile", "--json"], { cwd: dir, env: storesEnv(home) });
  expect(off.code, off.stderr).toBe(0);
  const [bad, foreign, linked, good] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
  const rec = (cwd: string) => JSON.stringify({ type: "user", cwd, message: { role: "user", content: "hi" } });
  const plant = [
    "set -e; p=$HOME/.claude/projects/-workspace-hostile; mkdir -p $p",
    `printf '%s\\nnot json\\n' '${rec("/workspace/hostile")}' > $p/${bad}.jsonl`,
    `printf '%s\\n' '${rec("/etc")}' > $p/${foreign}.jsonl`,
    `ln -s /etc/passwd $p/${linked}.jsonl`,
    `printf '%s\\n' '${rec("/workspace/hostile")}' > $p/${good}.jsonl`,
    `printf 'x' > $p/not-a-uuid.jsonl`,
  ].join("\n");
  expect((await h.run(["exec", "conv-hostile", "--", "sh", "-c", plant])).code).toBe(0);
  const back = await h.run(["bring-back", "conv-hostile", "--json"], { cwd: dir, env: storesEnv(home) });
  expect(back.code, back.stderr).toBe(0);
  const r = JSON.parse(back.stdout) as { conversations: { boxId: string }[]; notes: string[] };
  expect(r.conversations.map((c) => c.boxId)).toEqual([good]);
  expect(r.notes.join("\n")).toContain(`conversation ${bad} is not JSONL (line 2 is not JSON)`);
  expect(r.notes.join("\n")).toContain("not-a-uuid.jsonl, which is not a transcript");
  const here = Bun.spawnSync(["find", home, "-name", "*.jsonl"]).stdout.toString().trim().split("\n");
  expect(here.map((p) => p.split("/").at(-1))).toEqual([`${good}.jsonl`]);
  rmSync(home, { recursive: true, force: true });
}, 120_000);

test("against a remote daemon the conversation goes and comes back the same way (only the API is used)", async () => {
  const srv = await startServer("hutch-srv-conv-");
  const alice = await joinClient(srv, "alice");
  try {
    const dir = repo("far");
    const home = mkdtempSync(join(tmpdir(), "hutch-conv-far-"));
    const id = crypto.randomUUID();
    const project = join(home, ".claude", "projects", dir.replace(/[^A-Za-z0-9]/g, "-"));
    mkdirSync(project, { recursive: true });
    const rec = (text: string) =>
      `${JSON.stringify({ type: "user", cwd: dir, sessionId: id, message: { role: "user", content: text } })}\n`;
    writeFileSync(join(project, `${id}.jsonl`), rec(`look at ${dir}/parser.c`));
    const off = await alice.run(["offload", "--box", "far", "--json"], { cwd: dir, env: storesEnv(home) });
    expect(off.code, off.stderr).toBe(0);
    const inBox = `/home/hutch/.claude/projects/-workspace-far/${id}.jsonl`;
    const carried = await alice.run(["exec", "far", "--", "cat", inBox]);
    expect(JSON.parse(carried.stdout)).toMatchObject({ cwd: "/workspace/far", message: { content: "look at /workspace/far/parser.c" } });
    const handover = JSON.parse((await alice.run(["exec", "far", "--", "cat", "/home/hutch/.hutch/handover.json"])).stdout);
    expect(handover).toMatchObject({ workdir: "/workspace/far", conversations: { claude: { id, cwd: "/workspace/far" } } });

    // The box's agent added a turn: it comes home under a fresh id, paths back to this machine's.
    const line = JSON.stringify({
      type: "user",
      cwd: "/workspace/far",
      sessionId: id,
      message: { role: "user", content: "now /workspace/far/lexer.c" },
    });
    expect((await alice.run(["exec", "far", "--", "sh", "-c", 'printf "%s\\n" "$1" >> "$2"', "sh", line, inBox])).code).toBe(0);
    const back = await alice.run(["bring-back", "far", "--json"], { cwd: dir, env: storesEnv(home) });
    expect(back.code, back.stderr).toBe(0);
    const [c] = (JSON.parse(back.stdout) as { conversations: { id: string; path: string }[] }).conversations;
    expect(c!.id).not.toBe(id);
    const lines = readFileSync(c!.path, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { sessionId: string; message: { content: string } });
    expect(lines.map((l) => [l.sessionId, l.message.content])).toEqual([
      [c!.id, `look at ${dir}/parser.c`],
      [c!.id, `now ${dir}/lexer.c`],
    ]);
    rmSync(home, { recursive: true, force: true });
  } finally {
    await alice.cleanup();
    await srv.stop();
  }
}, 180_000);
