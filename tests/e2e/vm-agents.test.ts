// Coding agents in a microVM: the pinned CLIs reach a QEMU box (under tcg
// here) on read-only disks, run there as the box's user (uid 1000), through
// the broker against the fake model API, headless and interactive, exactly as
// in a process box.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Events, read } from "../../shared/src/index.ts";
import { installTestImage, makeHome, onTerminal, qemuFor, waitFor, type Home } from "../helpers.ts";
import { at, events, expectHeadlessTurn, fakeBindings, newSecrets, PROMPT } from "../agent-turns.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";

const AGENTS_DIR = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
const SECRETS = newSecrets();
let h: Home;
let fake: FakeModel;
let vmId = "";

beforeAll(async () => {
  h = makeHome("hutch-vma-");
  Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg", HUTCH_AGENTS_DIR: AGENTS_DIR });
  await installTestImage(h);
  fake = await startFakeModel();
  writeFileSync(join(h.home, "config.json"), JSON.stringify(fakeBindings(fake)));
  for (const [name, value] of Object.entries(SECRETS)) expect((await h.run(["secret", "set", name], { stdin: value })).code).toBe(0);
  expect((await h.run(["agent", "install"])).code).toBe(0);
  const box = await h.run([
    "box",
    "create",
    "vm",
    "--engine",
    "qemu",
    "--memory",
    "2G",
    "--start",
    "--secret",
    "anthropic",
    "--secret",
    "openai",
  ]);
  expect(box.code, box.stderr).toBe(0);
  vmId = (JSON.parse((await h.run(["box", "info", "vm", "--json"])).stdout) as { id: string }).id;
}, 900_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
}, 120_000);

describe("the agent CLIs in a VM", () => {
  test("reach it read-only; its processes are the box's user; root is there when asked", async () => {
    const r = await h.run([
      "exec",
      "vm",
      "--",
      "sh",
      "-c",
      "id -u; ls /.hutch/agents; touch $(ls -d /.hutch/agents/claude-*)/x 2>&1; stat -c '%u' /workspace /home/hutch",
    ]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toBe("1000");
    expect(lines).toEqual(expect.arrayContaining([expect.stringMatching(/^claude-/), expect.stringMatching(/^codex-/)]));
    expect(r.stdout).toContain("Read-only file system");
    expect(lines.slice(-2)).toEqual(["1000", "1000"]);
    const root = await h.run([
      "exec",
      "--user",
      "root",
      "vm",
      "--",
      "sh",
      "-c",
      "id -u; touch $(ls -d /.hutch/agents/claude-*)/x 2>&1 || true",
    ]);
    expect(root.stdout.split("\n")[0]).toBe("0");
    // Not even root writes the agent disks: they are read-only devices.
    expect(root.stdout).toContain("Read-only file system");
  });

  // All four start under tcg within the suite's budget. opencode is the slowest: its start-up alone takes
  // about 20 s of tcg (2.4 s on the host), and a turn 140-260 s on a loaded 2-core machine.
  test.each(["claude", "codex", "opencode", "pi"])(
    "%s: a headless turn writes the file as uid 1000 and logs input, tool call, result, final message, usage and idle in order; the fake saw only the real secret",
    async (agent) => {
      await expectHeadlessTurn(h, "vm", agent, fake, SECRETS);
      const owner = await h.run(["exec", "vm", "--", "stat", "-c", "%u", "/workspace/hello.txt"]);
      expect(owner.stdout.trim()).toBe("1000");
    },
    600_000,
  );

  test("interactive claude: attach, type a prompt, detach; the structured events keep arriving while detached; reattach shows the answer", async () => {
    await h.run(["exec", "vm", "--", "rm", "-f", "/workspace/hello.txt"]);
    fake.reset();
    fake.latencyMs = 3000;
    const a = onTerminal(h, ["run", "vm", "--agent", "claude"], 120, 40);
    await a.until(/session (ses_[0-9a-z]{20})/, 60_000);
    const sid = /session (ses_[0-9a-z]{20})/.exec(a.text())![1]!;
    await a.until("bypass permissions on", 120_000);
    a.type(PROMPT);
    // The TUI draws the words typed so far with cursor moves between them; once submitted, in one run.
    await a.until(/create\S*\s*hello\.txt\S*\s*containing\S*\s*hi/, 30_000);
    a.type("\r");
    await a.until(PROMPT, 30_000);
    a.type("\x01d");
    expect(await a.proc.exited).toBe(0);
    const detachedAt = (await events(h, sid)).findLast((e) => e.kind === "session.driver.released")!.seq;

    const wait = await h.run(["session", "wait", sid, "--json"]);
    expect(JSON.parse(wait.stdout), wait.stderr).toMatchObject({ state: "idle", ok: true });
    const log = await events(h, sid);
    expect(log.filter((e) => e.seq > detachedAt).map((e) => e.kind)).toEqual(
      expect.arrayContaining(["tool.called", "tool.completed", "message.completed", "agent.state", "attention.required"]),
    );
    expect(at(log, Events.messageCompleted, (d) => d.role === "assistant" && d.text.includes("Created hello.txt"))).toBeGreaterThan(
      at(log, Events.messageCompleted, (d) => d.role === "user" && d.text === PROMPT),
    );
    expect((await h.run(["exec", "vm", "--", "stat", "-c", "%u %s", "/workspace/hello.txt"])).stdout.trim()).toBe("1000 2");

    const b = onTerminal(h, ["session", "attach", sid], 120, 40);
    await b.until('"hi".', 60_000);
    b.type("\x01d");
    expect(await b.proc.exited).toBe(0);
    fake.reset();
  }, 400_000);

  test("a headless claude turn mid-way through a slow tool call when the box sleeps completes after the wake, every event once", async () => {
    await h.run(["exec", "vm", "--", "rm", "-f", "/workspace/slow-started", "/workspace/slow.txt"]);
    fake.reset();
    const prompt =
      "run exactly: touch /workspace/slow-started; sleep 10; echo slow-$((3*4)) > /workspace/slow.txt; cat /workspace/slow.txt";
    const turn = h.run(["run", "vm", "--agent", "claude", "--prompt", prompt, "--json"]);
    await waitFor(
      "the tool call to start",
      async () => (await h.run(["exec", "vm", "--", "test", "-e", "/workspace/slow-started"])).code === 0,
      240_000,
    );
    // Mid-call: started, and its file (ten seconds on) not written yet.
    expect((await h.run(["exec", "vm", "--", "test", "-e", "/workspace/slow.txt"])).code).toBe(1);
    const slept = await h.run(["box", "sleep", "vm", "--json"]);
    expect(slept.code, slept.stderr).toBe(0);
    expect((JSON.parse(slept.stdout) as { state: string }).state).toBe("asleep");
    // Asleep: its state on disk, and nothing of the box runs on the host.
    expect(existsSync(join(h.home, "boxes", vmId, "sleep.state"))).toBe(true);
    expect(qemuFor(vmId)).toEqual([]);
    const woke = await h.run(["box", "wake", "vm"]);
    expect(woke.code, woke.stderr).toBe(0);

    const r = await turn;
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const result = JSON.parse(r.stdout) as { session: string; state: string; ok: boolean };
    expect(result).toMatchObject({ state: "idle", ok: true });
    expect((await h.run(["exec", "vm", "--", "cat", "/workspace/slow.txt"])).stdout).toBe("slow-12\n");
    const log = await events(h, result.session);
    // Every event once: each tool call the agent read from the model logged once (one, unless the agent gave up
    // on a response and asked again, as Claude Code does; each one the fake handed out), the one command's one
    // result, one final message.
    const calls = log.flatMap((e) => read(e, Events.toolCalled) ?? []).map((c) => c.id);
    const results = log.flatMap((e) => read(e, Events.toolCompleted) ?? []);
    const asked = fake.modelCalls().flatMap((c) => (c.reply?.kind === "tool" ? [c.reply.id] : []));
    // What to look at when this fails: the log's events (errors spelled out) and the model calls the fake answered.
    const why = JSON.stringify({
      log: log.map((e) => (e.kind === "error.raised" || e.kind.startsWith("tool.") ? [e.seq, e.kind, e.data] : [e.seq, e.kind])),
      model: fake.modelCalls().map((c) => ({ at: c.at, reply: c.reply, fault: c.fault, last: JSON.stringify(c.body).slice(-300) })),
    });
    // Allowed, but worth seeing in the run's output: what made the agent ask again.
    if (asked.length !== 1) console.warn(`the agent asked the model for its tool call ${asked.length} times: ${why}`);
    expect(new Set(calls).size, why).toBe(calls.length);
    for (const id of calls) expect(asked, why).toContain(id);
    expect(results.length, why).toBe(1);
    expect(results[0]!, why).toMatchObject({ status: "ok" });
    expect(calls, why).toContain(results[0]!.id);
    expect(results[0]!.output).toContain("slow-12");
    expect(
      log.filter((e) => read(e, Events.messageCompleted)?.role === "assistant" && read(e, Events.messageCompleted)?.text === "Ran it.")
        .length,
    ).toBe(1);
    expect(new Set(log.map((e) => e.seq)).size).toBe(log.length);
    expect(log.map((e) => e.kind)).toEqual(expect.arrayContaining([Events.boxSlept.kind, Events.boxWoke.kind]));
    fake.reset();
  }, 600_000);
});
