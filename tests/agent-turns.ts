// What the agent tests share: the fake model's bindings, reading a session's
// log, and the checks of one headless turn, the same for a process box and a
// VM box.
import { expect } from "bun:test";
import { Events, read, type EventDef, type SessionEvent, type Static } from "../shared/src/index.ts";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startFakeModel, type FakeModel } from "./fixtures/fake-model/index.ts";
import { makeHome, type Home } from "./helpers.ts";

/** The agent CLIs' cache, shared by every test home (scripts/setup-tests fills it). */
export const AGENTS_DIR = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";

export const PROMPT = "create hello.txt containing hi";

export function newSecrets() {
  return { anthropic: `sk-ant-api03-${crypto.randomUUID()}`, openai: `sk-proj-${crypto.randomUUID()}` };
}

/**
 * A home whose agents reach the fake model API (started here; the caller
 * stops it): the shared agent cache, the fake's bindings, these secrets
 * stored, and these agents installed (all of them when none is named).
 */
export async function agentHome(
  prefix: string,
  secrets: Partial<Record<"anthropic" | "openai", string>>,
  agents: string[] = [],
): Promise<{ h: Home; fake: FakeModel }> {
  const h = makeHome(prefix);
  h.env.HUTCH_AGENTS_DIR = AGENTS_DIR;
  const fake = await startFakeModel();
  writeFileSync(join(h.home, "config.json"), JSON.stringify(fakeBindings(fake)));
  for (const [name, value] of Object.entries(secrets)) expect((await h.run(["secret", "set", name], { stdin: value })).code).toBe(0);
  const install = await h.run(["agent", "install", ...agents]);
  expect(install.code, install.stderr).toBe(0);
  return { h, fake };
}

/** config.json for a home whose model API is the fake: the broker pins it on loopback and trusts its test CA. */
export function fakeBindings(fake: FakeModel) {
  const common = { host: "localhost", port: fake.port, address: "127.0.0.1", ca: fake.ca.caFile };
  return {
    bindings: {
      anthropic: {
        ...common,
        header: "x-api-key",
        format: "{secret}",
        secret: "anthropic",
        methods: ["GET", "POST", "HEAD"],
        paths: ["/v1/", "/api/"],
        env: { ANTHROPIC_BASE_URL: "{url}", ANTHROPIC_API_KEY: "{stub}" },
      },
      openai: {
        ...common,
        header: "Authorization",
        format: "Bearer {secret}",
        secret: "openai",
        methods: ["GET", "POST"],
        paths: ["/v1/"],
        env: { OPENAI_BASE_URL: "{url}/v1", OPENAI_API_KEY: "{stub}" },
      },
    },
  };
}

export async function events(home: Home, session: string): Promise<SessionEvent[]> {
  const r = await home.run(["session", "log", session, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as SessionEvent);
}

/** The index of the first event of def's kind whose (checked) data passes pred. */
export const at = <D extends EventDef>(list: SessionEvent[], def: D, pred: (d: Static<D["data"]>) => boolean = () => true) =>
  list.findIndex((e) => {
    const d = read(e, def);
    return d !== null && pred(d);
  });

/**
 * One headless turn of `agent` in `box`: the file is written, the log holds
 * the input, the tool call, its result, the final message, usage and idle in
 * that order, and the fake saw the real secret on every call and never a stub.
 */
export async function expectHeadlessTurn(
  h: Home,
  box: string,
  agent: string,
  fake: FakeModel,
  secrets: Record<string, string>,
): Promise<SessionEvent[]> {
  await h.run(["exec", box, "--", "rm", "-f", "/workspace/hello.txt"]);
  fake.reset();
  const r = await h.run(["run", box, "--agent", agent, "--prompt", PROMPT, "--json"]);
  expect(r.code, r.stderr + r.stdout).toBe(0);
  const result = JSON.parse(r.stdout) as { session: string; state: string; ok: boolean; exit: { code: number } };
  expect(result).toMatchObject({ state: "idle", ok: true, exit: { code: 0 } });

  const file = await h.run(["exec", box, "--", "cat", "/workspace/hello.txt"]);
  expect(file.stdout).toBe("hi");

  const log = await events(h, result.session);
  const input = at(log, Events.inputSent, (d) => d.text === PROMPT);
  expect(log[input]!.actor.kind).toBe("user");
  const call = at(log, Events.toolCalled, (d) => JSON.stringify(d.input).includes("hello.txt"));
  const callId = log[call] && read(log[call], Events.toolCalled)?.id;
  const done = at(log, Events.toolCompleted, (d) => d.id === callId && d.status === "ok");
  const final = at(log, Events.messageCompleted, (d) => d.role === "assistant" && d.text.includes('Created hello.txt containing "hi"'));
  const usage = log.findLastIndex((e) => read(e, Events.usageReported)?.available === true);
  const idle = at(log, Events.agentState, (d) => d.state === "idle");
  const order = [input, call, done, final, usage, idle];
  expect(
    order.every((i) => i >= 0),
    JSON.stringify(order),
  ).toBe(true);
  expect([...order].sort((a, b) => a - b)).toEqual(order);
  expect(log[call]!.actor.kind).toBe("agent");
  expect(log.filter((e) => e.kind === "agent.raw" && read(e, Events.agentRaw)?.reason !== "unknown")).toEqual([]);

  // The secret arrived at the fake only through the broker: every model call carried it, none a stub.
  const calls = fake.modelCalls();
  expect(calls.length).toBeGreaterThanOrEqual(2);
  for (const c of calls) {
    const key = c.headers["x-api-key"] ?? c.headers.authorization ?? "(none)";
    expect([secrets.anthropic, `Bearer ${secrets.openai}`]).toContain(key);
  }
  expect(JSON.stringify(fake.requests)).not.toContain("hutch-stub-");
  const text = JSON.stringify(log);
  for (const s of Object.values(secrets)) expect(text).not.toContain(s);
  return log;
}
