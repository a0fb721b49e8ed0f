// Schedules end to end: the compiled daemon's timer fires a cron schedule,
// which wakes the sleeping box, runs the real Claude Code CLI headless against the
// fake model API on loopback, records the run's events as the schedule and
// lets the box sleep again; and a daemon that was down across one-off runs catches
// up the one that asks for it, once, and skips the other.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Events, read, type Schedule } from "../../shared/src/index.ts";
import { pidAlive, waitFor, type Home } from "../helpers.ts";
import { agentHome, events, newSecrets, PROMPT } from "../agent-turns.ts";
import { joinClient, startServer } from "../remote.ts";
import type { FakeModel } from "../fixtures/fake-model/index.ts";

const SECRETS = newSecrets();
let h: Home;
let fake: FakeModel;

beforeAll(async () => {
  ({ h, fake } = await agentHome("hutch-sch-", { anthropic: SECRETS.anthropic }, ["claude"]));
  const box = await h.run(["box", "create", "sc", "--start", "--secret", "anthropic"]);
  expect(box.code, box.stderr).toBe(0);
  const slept = await h.run(["box", "sleep", "sc"]);
  expect(slept.code, slept.stderr).toBe(0);
}, 600_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
});

async function info(id: string): Promise<Schedule> {
  const r = await h.run(["schedule", "info", id, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Schedule;
}

test("a schedule firing every minute wakes the sleeping box, runs its turn against the fake, records the run as the schedule, and the box sleeps again", async () => {
  const added = await h.run([
    "schedule",
    "add",
    "sc",
    "--cron",
    "* * * * *",
    "--agent",
    "claude",
    "--prompt",
    PROMPT,
    "--max-run",
    "2m",
    "--json",
  ]);
  expect(added.code, added.stderr).toBe(0);
  const s = JSON.parse(added.stdout) as Schedule;
  expect(s).toMatchObject({ boxName: "sc", cron: "* * * * *", state: "active", catchUp: "once", maxRunS: 120 });
  expect(s.spreadS).toBeLessThan(30);
  expect((await h.run(["box", "info", "sc", "--json"])).stdout).toContain('"state": "asleep"');

  const done = await waitFor(
    "the first run to finish",
    async () => {
      const now = await info(s.id);
      return now.lastRun && now.lastRun.status !== "running" ? now : null;
    },
    150_000,
  );
  const run = done.lastRun!;
  expect(run, JSON.stringify(run)).toMatchObject({ trigger: "cron", status: "ok", exit: 0, woke: true });
  expect(run.tokens!.input + run.tokens!.output).toBeGreaterThan(0);
  expect(run.boxSeconds).toBeGreaterThan(0);
  // Removed at once, so no second run starts while the rest is checked.
  expect((await h.run(["schedule", "rm", s.id])).code).toBe(0);

  const log = await events(h, run.session!);
  const asSchedule = { kind: "orchestrator" as const, id: expect.stringMatching(new RegExp(`/schedule:${s.id}$`)) };
  const started = log.findIndex((e) => read(e, Events.scheduleRunStarted)?.schedule === s.id);
  const input = log.findIndex((e) => read(e, Events.inputSent)?.text === PROMPT);
  const tool = log.findIndex((e) => e.kind === "tool.called");
  const finished = log.findIndex((e) => read(e, Events.scheduleRunFinished)?.schedule === s.id);
  expect(
    [started, input, tool, finished].every((i) => i >= 0),
    JSON.stringify([started, input, tool, finished]),
  ).toBe(true);
  expect(started < input && input < tool && tool < finished).toBe(true);
  for (const i of [0, started, input, finished]) expect(log[i]!.actor).toEqual(asSchedule);
  expect(log[tool]!.actor.kind).toBe("agent");
  expect(read(log[started]!, Events.scheduleRunStarted)).toMatchObject({ trigger: "cron", woke: true, agent: "claude" });
  expect(read(log[finished]!, Events.scheduleRunFinished)).toMatchObject({ status: "ok", exit: 0, tokens: run.tokens });
  expect(log.at(-1)!.kind).toBe("session.closed");
  expect(JSON.stringify(log)).not.toContain(SECRETS.anthropic);

  // The box sleeps again, and the turn's work is there when an exec wakes it.
  await waitFor("the box to sleep again", async () => (await h.run(["box", "info", "sc", "--json"])).stdout.includes('"state": "asleep"'));
  const file = await h.run(["exec", "sc", "--", "cat", "/workspace/hello.txt"]);
  expect(file.stdout).toBe("hi");
}, 240_000);

test("with the daemon down across a one-off's time, --catch-up once runs it once at start and --catch-up skip does not", async () => {
  const add = async (catchUp: string) => {
    const r = await h.run([
      "schedule",
      "add",
      "sc",
      "--at",
      "+3s",
      "--agent",
      "shell",
      "--prompt",
      `echo ${catchUp}`,
      "--catch-up",
      catchUp,
      "--json",
    ]);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Schedule;
  };
  const once = await add("once");
  const skip = await add("skip");
  const pid = h.daemonPid()!;
  process.kill(pid, "SIGTERM");
  await waitFor("the daemon to stop", () => !pidAlive(pid));
  await Bun.sleep(Math.max(0, Date.parse(once.at!) - Date.now()) + 1500);
  // Any verb starts the daemon again.
  const list = await h.run(["schedule", "list", "--json"]);
  expect(list.code, list.stderr).toBe(0);
  const ran = await waitFor(
    "the caught-up run to finish",
    async () => {
      const now = await info(once.id);
      return now.lastRun && now.lastRun.status !== "running" ? now : null;
    },
    60_000,
  );
  expect(ran).toMatchObject({ state: "done", runs: 1, skipped: 0, nextAt: null });
  expect(ran.lastRun).toMatchObject({ trigger: "catch-up", status: "ok", exit: 0 });
  const log = await events(h, ran.lastRun!.session!);
  expect(log.some((e) => read(e, Events.messageCompleted)?.text.includes("once"))).toBe(true);
  expect(await info(skip.id)).toMatchObject({ state: "done", runs: 0, skipped: 1, lastRun: null, nextAt: null });
  // Only the one run: no other session was made for either schedule.
  const sessions = JSON.parse((await h.run(["session", "list", "--json"])).stdout) as { label?: string }[];
  expect(sessions.filter((x) => x.label === `schedule ${once.id}`)).toHaveLength(1);
  expect(sessions.filter((x) => x.label === `schedule ${skip.id}`)).toHaveLength(0);
}, 120_000);

test("through --remote: a schedule added from a client runs on the server's daemon; another user neither sees nor reaches it", async () => {
  const server = await startServer("hutch-sch-srv-");
  try {
    const alice = await joinClient(server, "alice");
    const bob = await joinClient(server, "bob");
    expect((await alice.run(["box", "create", "rb", "--start"])).code).toBe(0);
    const r = await alice.run([
      "--remote",
      "srv",
      "schedule",
      "add",
      "rb",
      "--at",
      "+2s",
      "--agent",
      "shell",
      "--prompt",
      "echo from afar",
      "--json",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as Schedule;
    expect(s).toMatchObject({ owner: "alice", boxName: "rb" });
    const ran = await waitFor(
      "the remote run to finish",
      async () => {
        const now = JSON.parse((await alice.run(["schedule", "info", s.id, "--json"])).stdout) as Schedule;
        return now.lastRun && now.lastRun.status !== "running" ? now : null;
      },
      60_000,
    );
    expect(ran.lastRun).toMatchObject({ trigger: "at", status: "ok", exit: 0 });
    const log = await events(alice, ran.lastRun!.session!);
    expect(log.some((e) => read(e, Events.messageCompleted)?.text.includes("from afar"))).toBe(true);
    expect(log[0]!.actor).toEqual({ kind: "orchestrator", id: `alice/schedule:${s.id}` });
    // Bob: not in his list, and answered as missing (exit 4), for reading and for running it.
    expect(JSON.parse((await bob.run(["schedule", "list", "--json"])).stdout)).toEqual([]);
    for (const verb of ["info", "run", "rm"]) {
      const b = await bob.run(["schedule", verb, s.id]);
      expect(b.code).toBe(4);
      expect(b.stderr).toContain(`no schedule "${s.id}"`);
    }
    const onHers = await bob.run(["schedule", "add", "rb", "--at", "+1h", "--agent", "shell", "--prompt", "x"]);
    expect(onHers.code).toBe(4);
    await alice.cleanup();
    await bob.cleanup();
  } finally {
    await server.stop();
  }
}, 180_000);
