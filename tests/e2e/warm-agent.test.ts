// A warm headless agent: a session made headless with no prompt (an
// editor's) keeps one Claude Code process for its prompts, fed over stdin.
// Real Claude Code in a process box, through the broker, against the fake
// model API (the one fake allowed).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { Events, read, type Session, type SessionEvent } from "../../shared/src/index.ts";
import { waitFor, type Home } from "../helpers.ts";
import { agentHome, at, events, newSecrets } from "../agent-turns.ts";
import type { FakeModel } from "../fixtures/fake-model/index.ts";

const SECRETS = newSecrets();
let h: Home;
let fake: FakeModel;
let id = "";

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`http://localhost${path}`, {
    method,
    unix: join(h.home, "hutch.sock"),
    headers: body === undefined ? {} : { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = (await res.json()) as T;
  expect(res.ok, JSON.stringify(json)).toBe(true);
  return json;
}

/** Sends a prompt as the driver and waits for its turn to settle; the log after it. */
async function turn(text: string): Promise<{ log: SessionEvent[]; input: number }> {
  expect((await h.run(["session", "send", id, text])).code).toBe(0);
  const wait = await h.run(["session", "wait", id, "--json"]);
  expect(JSON.parse(wait.stdout), wait.stderr).toMatchObject({ state: "idle", ok: true });
  const log = await events(h, id);
  return { log, input: at(log, Events.inputSent, (d) => d.text.trim() === text) };
}

const started = (log: SessionEvent[]) => log.filter((e) => e.kind === Events.execStarted.kind).map((e) => read(e, Events.execStarted)!);
/** Claude Code processes in the box fed prompts on stdin. */
const warmInBox = async () =>
  Number((await h.run(["exec", "wa", "--", "sh", "-c", "ps -eo args | grep -c '[i]nput-format stream-json' || true"])).stdout.trim());

beforeAll(async () => {
  ({ h, fake } = await agentHome("hutch-warm-", SECRETS, ["claude"]));
  const box = await h.run(["box", "create", "wa", "--start", "--secret", "anthropic"]);
  expect(box.code, box.stderr).toBe(0);
  id = (await api<Session>("POST", "/v1/sessions", { box: "wa", agent: "claude", headless: true })).id;
  expect((await h.run(["session", "driver", "acquire", id])).code).toBe(0);
}, 600_000);

afterAll(async () => {
  await h.cleanup();
  await fake.stop();
});

test("two prompts are answered by one warm process; the second turn's events are complete and in order", async () => {
  const one = await turn("create one.txt containing 1");
  expect(started(one.log)).toEqual([expect.objectContaining({ warm: true })]);
  const { log, input } = await turn("create two.txt containing 2");
  expect((await h.run(["exec", "wa", "--", "cat", "/workspace/one.txt", "/workspace/two.txt"])).stdout).toBe("12");
  // One process for both turns, still running: no exec.exited.
  expect(started(log)).toHaveLength(1);
  expect(log.some((e) => e.kind === Events.execExited.kind)).toBe(false);
  expect(await warmInBox()).toBe(1);

  const after = (i: number) => i > input;
  const busy = log.findIndex((e, i) => after(i) && read(e, Events.agentState)?.state === "busy");
  const call = log.findIndex((e, i) => after(i) && JSON.stringify(read(e, Events.toolCalled)?.input ?? "").includes("two.txt"));
  const callId = read(log[call]!, Events.toolCalled)!.id;
  const done = at(log, Events.toolCompleted, (d) => d.id === callId && d.status === "ok");
  const final = at(log, Events.messageCompleted, (d) => d.role === "assistant" && d.text.includes('Created two.txt containing "2"'));
  const usage = log.findLastIndex((e) => read(e, Events.usageReported)?.available === true);
  const idle = log.findLastIndex((e) => read(e, Events.agentState)?.state === "idle");
  const attention = log.findLastIndex((e) => e.kind === Events.attentionRequired.kind);
  const order = [input, busy, call, done, final, usage, idle, attention];
  expect(
    order.every((i) => i >= 0),
    JSON.stringify(order),
  ).toBe(true);
  expect([...order].sort((a, b) => a - b)).toEqual(order);
  expect(attention).toBe(log.length - 1);
  expect(log.filter((e) => e.kind === "agent.raw" && read(e, Events.agentRaw)?.reason !== "unknown")).toEqual([]);
  // The conversation went on: the model saw the first prompt again.
  expect(JSON.stringify(fake.modelCalls().at(-1)!.body)).toContain("create one.txt containing 1");
}, 180_000);

test("an interrupt mid-turn ends the turn as a stopped run's ends, and keeps the process; the next prompt is answered by it", async () => {
  fake.reset();
  fake.latencyMs = 60_000;
  const slow = "create slow.txt containing z";
  expect((await h.run(["session", "send", id, slow])).code).toBe(0);
  await waitFor("the slow model to be asked", () => fake.modelCalls().length > 0, 60_000);
  expect(await api<{ interrupted: boolean }>("POST", `/v1/sessions/${id}/interrupt`)).toEqual({ interrupted: true });
  fake.latencyMs = 0;
  // Ended by the interrupt, not by the model.
  expect(fake.modelCalls().filter((c) => c.reply !== undefined)).toEqual([]);
  const log = await events(h, id);
  const input = at(log, Events.inputSent, (d) => d.text.trim() === slow);
  // As a stopped per-prompt run ends (an error, the agent in error, attention), but the process stays: no exec.exited.
  const ending: string[] = [Events.errorRaised.kind, Events.agentState.kind, Events.attentionRequired.kind, Events.execExited.kind];
  const end = log.slice(input).filter((e) => ending.includes(e.kind));
  expect(end.map((e) => e.kind).slice(-3)).toEqual([Events.errorRaised.kind, Events.agentState.kind, Events.attentionRequired.kind]);
  expect(read(end.at(-2)!, Events.agentState)?.state).toBe("error");

  const next = await turn("create three.txt containing 3");
  expect(next.log.slice(next.input).some((e) => e.kind === Events.toolCompleted.kind)).toBe(true);
  expect(started(next.log)).toHaveLength(1);
  expect(await warmInBox()).toBe(1);
}, 180_000);

test("a warm process that dies between turns: exec.exited is logged, and the next prompt starts another that resumes the conversation", async () => {
  const pid = started(await events(h, id))[0]!.pid!;
  expect((await h.run(["exec", "wa", "--", "kill", "-TERM", String(pid)])).code).toBe(0);
  await waitFor("the warm process's exit in the log", async () => (await events(h, id)).some((e) => e.kind === Events.execExited.kind));
  fake.reset();
  const { log } = await turn("create four.txt containing 4");
  expect((await h.run(["exec", "wa", "--", "cat", "/workspace/four.txt"])).stdout).toBe("4");
  expect(started(log)).toHaveLength(2);
  expect(JSON.stringify(fake.modelCalls().at(-1)!.body)).toContain("create one.txt containing 1");
}, 180_000);

test("closing the session ends the warm process: exec.exited before session.closed, and no claude left in the box", async () => {
  expect((await h.run(["session", "close", id])).code).toBe(0);
  const kinds = (await events(h, id)).map((e) => e.kind);
  expect(kinds.at(-1)).toBe("session.closed");
  expect(kinds.at(-2)).toBe("exec.exited");
  const exit = read((await events(h, id)).at(-2)!, Events.execExited);
  expect(exit).toEqual({ code: 0, signal: null });
  expect(await warmInBox()).toBe(0);
}, 60_000);
