// Process boxes asleep: CRIU cannot checkpoint on these hosts (host/src/engine/process/README.md),
// so a sleep stops the box's programs and keeps its disk, the sessions hear so, and
// on wake an agent's conversation goes on through its harness's resume.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { boxPids, type Home } from "../helpers.ts";
import { agentHome, newSecrets, PROMPT } from "../agent-turns.ts";
import type { FakeModel } from "../fixtures/fake-model/index.ts";

const SECRETS = newSecrets();
let h: Home;
let fake: FakeModel;

beforeAll(async () => {
  ({ h, fake } = await agentHome("hutch-psleep-", SECRETS));
  const box = await h.run(["box", "create", "ps", "--start", "--secret", "anthropic", "--secret", "openai"]);
  expect(box.code, box.stderr).toBe(0);
}, 600_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
});

async function info(): Promise<{ id: string; state: string; sleep?: { keeps: string; bytes: number } }> {
  return JSON.parse((await h.run(["box", "info", "ps", "--json"])).stdout);
}

test("a process box sleeps with no process left and its disk kept; the session records its programs were stopped; an exec wakes it; the agent's conversation resumes", async () => {
  const first = await h.run(["run", "ps", "--agent", "pi", "--prompt", PROMPT, "--json"]);
  expect(first.code, first.stderr).toBe(0);
  const sid = (JSON.parse(first.stdout) as { session: string }).session;
  expect((await h.run(["exec", "ps", "--", "sh", "-c", "echo kept > /workspace/k"])).code).toBe(0);
  const { id } = await info();
  expect(boxPids(id).length).toBeGreaterThan(0);

  const s = await h.run(["box", "sleep", "ps", "--json"]);
  expect(s.code, s.stderr).toBe(0);
  const asleep = await info();
  expect(asleep.state).toBe("asleep");
  expect(asleep.sleep).toEqual({ keeps: "disk", bytes: 0 });
  expect(boxPids(id)).toEqual([]);
  expect((await h.run(["box", "list"])).stdout).toContain("asleep (0.0 MiB on disk)");
  const log = (await h.run(["session", "log", sid, "--json"])).stdout;
  expect(log).toContain('"box.slept"');
  expect(log).toMatch(/"programsStopped":\s*true/);

  // Anything that needs the box wakes it.
  const r = await h.run(["exec", "ps", "--", "cat", "/workspace/k"]);
  expect([r.code, r.stdout]).toEqual([0, "kept\n"]);
  expect(r.stderr).toContain("waking ps");
  expect((await info()).state).toBe("running");
  expect((await h.run(["session", "log", sid, "--json"])).stdout).toContain('"box.woke"');

  // The conversation goes on: the model sees the first exchange again.
  expect((await h.run(["box", "sleep", "ps"])).code).toBe(0);
  expect((await h.run(["session", "driver", "acquire", sid])).code).toBe(0);
  fake.reset();
  expect((await h.run(["session", "send", sid, "create two.txt containing yo"])).code).toBe(0);
  const wait = await h.run(["session", "wait", sid, "--json"]);
  expect(JSON.parse(wait.stdout)).toMatchObject({ state: "idle", ok: true });
  expect((await h.run(["exec", "ps", "--", "cat", "/workspace/two.txt"])).stdout).toBe("yo");
  expect(JSON.stringify(fake.modelCalls().at(-1)!.body)).toContain(PROMPT);
}, 300_000);

test("hutch doctor says what a sleep keeps on this host, for each engine", async () => {
  const r = await h.run(["doctor", "--json"]);
  expect(r.stdout).toContain("sleep: process boxes");
  expect(r.stdout).toContain("stops the box's programs and keeps its disk");
}, 300_000);
