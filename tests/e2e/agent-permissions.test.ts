// `hutch run --permissions ask`: the real Claude Code and Codex CLIs in a
// process box ask a person before a tool call (the fake model API asks them
// to delete a directory): Claude Code through its permission prompt tool,
// Codex through a PreToolUse hook, both reaching the box's MCP server and
// hutch approvals. Denied, the data stays and the agent is told why;
// allowed, the command runs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Events, read, type Approval } from "../../shared/src/index.ts";
import { waitFor, type Home } from "../helpers.ts";
import { agentHome, events, newSecrets } from "../agent-turns.ts";
import type { FakeModel } from "../fixtures/fake-model/index.ts";

const SECRETS = newSecrets();
/** What the fake model asks each agent to run. Codex 0.171 refuses `rm -f` forms itself, whatever its approvals ("rm -f style commands are not permitted"), so it is asked for `rm -r`. */
const COMMAND: Record<string, string> = { claude: "rm -rf data", codex: "rm -r data" };
let h: Home;
let fake: FakeModel;

beforeAll(async () => {
  ({ h, fake } = await agentHome("hutch-perm-", SECRETS, ["claude", "codex"]));
  const box = await h.run(["box", "create", "pa", "--start", "--secret", "anthropic", "--secret", "openai"]);
  expect(box.code, box.stderr).toBe(0);
}, 600_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
});

async function pending(): Promise<Approval[]> {
  const r = await h.run(["approvals", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Approval[];
}

const dataThere = async () => (await h.run(["exec", "pa", "--", "test", "-e", "/workspace/data/keep.txt"])).code === 0;

/** Starts the turn, waits for its one approval, answers it with `verb`, and returns the turn's result and its session's log. */
async function turnAnswered(agent: string, verb: string[]) {
  fake.reset();
  const turn = h.run(["run", "pa", "--agent", agent, "--permissions", "ask", "--prompt", `run exactly: ${COMMAND[agent]!}`, "--json"]);
  const asked = await waitFor("the agent's approval to be asked", async () => (await pending()).find((a) => a.kind === "tool"), 120_000);
  expect(asked).toMatchObject({ kind: "tool", boxName: "pa", target: "Bash", state: "pending" });
  expect(asked.summary).toContain(COMMAND[agent]!);
  // Still asking: nothing ran yet.
  expect(await dataThere()).toBe(true);
  const answered = await h.run([...verb, asked.id]);
  expect(answered.code, answered.stderr).toBe(0);
  const r = await turn;
  expect(r.code, r.stderr + r.stdout).toBe(0);
  const result = JSON.parse(r.stdout) as { session: string; state: string; ok: boolean };
  expect(result).toMatchObject({ state: "idle", ok: true });
  return { asked, log: await events(h, result.session) };
}

describe.each(["claude", "codex"])("%s", (agent) => {
  test("denied: the directory is still there, the agent was told why, and the request and the decision are logged once each", async () => {
    expect((await h.run(["exec", "pa", "--", "sh", "-c", "mkdir -p /workspace/data && echo k > /workspace/data/keep.txt"])).code).toBe(0);
    const { asked, log } = await turnAnswered(agent, ["deny", "--reason", "keep the data"]);
    expect(await dataThere()).toBe(true);
    const requested = log.filter((e) => read(e, Events.approvalRequested)?.id === asked.id);
    const decided = log.filter((e) => read(e, Events.approvalDecided)?.id === asked.id);
    expect(requested.length).toBe(1);
    expect(decided.map((e) => read(e, Events.approvalDecided)!.decision)).toEqual(["reject_once"]);
    expect(decided[0]!.actor.kind).toBe("user");
    // The model was told the person's reason, as the refused call's result.
    expect(JSON.stringify(fake.modelCalls().at(-1)!.body)).toContain("keep the data");
    if (agent === "claude") {
      // Claude Code's stream shows the refused call ending, with the reason.
      const done = log.map((e) => read(e, Events.toolCompleted)).filter((d) => d !== null);
      expect(done.length).toBe(1);
      expect(JSON.stringify(done[0])).toContain("keep the data");
    }
  }, 240_000);

  test("allowed: the command runs and the directory is gone", async () => {
    expect(await dataThere()).toBe(true);
    const { log } = await turnAnswered(agent, ["approve"]);
    expect(await dataThere()).toBe(false);
    expect((await h.run(["exec", "pa", "--", "test", "-e", "/workspace/data"])).code).toBe(1);
    expect(log.map((e) => read(e, Events.approvalDecided)?.decision).filter(Boolean)).toEqual(["allow_once"]);
  }, 240_000);
});

test("bad input: ask for an agent that cannot, or without a prompt, is refused naming what works", async () => {
  const pi = await h.run(["run", "pa", "--agent", "pi", "--permissions", "ask", "--prompt", "hi"]);
  expect(pi.code).not.toBe(0);
  expect(pi.stderr).toContain("cannot ask a person before its tool calls");
  expect(pi.stderr).toContain("--agent claude or --agent codex");
  const tui = await h.run(["run", "pa", "--agent", "claude", "--permissions", "ask", "--detach"]);
  expect(tui.code).not.toBe(0);
  expect(tui.stderr).toContain("--permissions ask is for headless turns");
});
