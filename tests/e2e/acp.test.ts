// `hutch acp` as an editor runs it: the ACP SDK's own client side over the
// stdio of a spawned `dist/hutch acp`, a real Claude Code in a process box,
// the fake model API on loopback (the one fake allowed). The editor starts a
// session, prompts, cancels a slow turn; a second editor process loads the
// same session and gets its whole history in order; a turn sent from the CLI
// in between reaches the editor too, with its actor.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { methods, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import { type Editor, editor as spawnEditor, hutchOf, initialize, textOf, view } from "../acp-editor.ts";
import { makeHome, newRepo, waitFor, type Home, scratchDir } from "../helpers.ts";
import { fakeBindings, newSecrets, PROMPT } from "../agent-turns.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";

const AGENTS_DIR = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
const SECRETS = newSecrets();
let h: Home;
let fake: FakeModel;
let cwd: string;

const editor = (name: string) => spawnEditor(h, name);
let first: Editor;
let sessionId = "";

beforeAll(async () => {
  h = makeHome("hutch-acp-");
  h.env.HUTCH_AGENTS_DIR = AGENTS_DIR;
  fake = await startFakeModel();
  writeFileSync(join(h.home, "config.json"), JSON.stringify(fakeBindings(fake)));
  for (const [name, value] of Object.entries(SECRETS)) expect((await h.run(["secret", "set", name], { stdin: value })).code).toBe(0);
  const install = await h.run(["agent", "install", "claude"]);
  expect(install.code, install.stderr).toBe(0);
  cwd = scratchDir("hutch-acp-cwd-");
  first = editor("test-editor");
}, 600_000);

afterAll(async () => {
  await first?.stop();
  await h.cleanup();
  await fake.stop();
});

test("initialize, session/new, session/prompt: the prompt, the agent's message chunks and its tool call stream in, and the file is written in the box", async () => {
  const init = await initialize(first, "test-editor");
  expect(init.protocolVersion).toBe(PROTOCOL_VERSION);
  expect(init.agentCapabilities?.loadSession).toBe(true);
  const made = await first.conn.agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
  sessionId = made.sessionId;
  expect(sessionId).toMatch(/^ses_[0-9a-z]{20}$/);

  const r = await first.conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: PROMPT }] });
  expect(r.stopReason).toBe("end_turn");
  const ups = first.updates.filter((n) => n.sessionId === sessionId).map((n) => n.update);
  const kinds = ups.map((u) => u.sessionUpdate);
  const prompt = ups.find((u) => u.sessionUpdate === "user_message_chunk")!;
  expect(textOf(prompt)).toBe(PROMPT);
  expect(hutchOf(prompt).actor).toMatchObject({ kind: "ide" });
  expect(hutchOf(prompt).actor.id).toEndWith("/ide:acp.test-editor");
  const call = ups.find((u) => u.sessionUpdate === "tool_call");
  expect(call).toMatchObject({ sessionUpdate: "tool_call", kind: "execute", status: "in_progress" });
  const callId = (call as { toolCallId: string }).toolCallId;
  expect(ups.find((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === callId)).toMatchObject({ status: "completed" });
  const said = ups
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map(textOf)
    .join("");
  expect(said).toContain("Created hello.txt");
  // In order: the prompt, the tool call, its result, the final words.
  expect(kinds.indexOf("user_message_chunk")).toBeLessThan(kinds.indexOf("tool_call"));
  expect(kinds.indexOf("tool_call")).toBeLessThan(kinds.indexOf("tool_call_update"));
  expect(kinds.indexOf("tool_call_update")).toBeLessThan(kinds.lastIndexOf("agent_message_chunk"));
  const seqs = ups.map((u) => hutchOf(u).seq);
  expect(seqs).toEqual([...seqs].sort((a, b) => a - b));

  const info = JSON.parse((await h.run(["session", "info", sessionId, "--json"])).stdout) as { boxName: string; driver?: unknown };
  expect((await h.run(["exec", info.boxName, "--", "cat", "/workspace/hello.txt"])).stdout).toBe("hi");
  // The slot was taken for the turn and handed back.
  expect(info.driver).toBeUndefined();
}, 180_000);

test("a turn sent from the CLI reaches the editor, in order, with the CLI's actor; the editor's next prompt follows it", async () => {
  expect((await h.run(["session", "driver", "acquire", sessionId])).code).toBe(0);
  expect((await h.run(["session", "send", sessionId, "create two.txt containing yo"])).code).toBe(0);
  const wait = await h.run(["session", "wait", sessionId, "--json"]);
  expect(JSON.parse(wait.stdout)).toMatchObject({ state: "idle", ok: true });
  expect((await h.run(["session", "driver", "release", sessionId])).code).toBe(0);
  await waitFor("the CLI's prompt to reach the editor", () =>
    first.updates.some((n) => n.update.sessionUpdate === "user_message_chunk" && textOf(n.update).includes("two.txt")),
  );

  const r = await first.conn.agent.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "create three.txt containing yes" }],
  });
  expect(r.stopReason).toBe("end_turn");
  const prompts = first.updates
    .filter((n) => n.sessionId === sessionId && n.update.sessionUpdate === "user_message_chunk")
    .map((n) => [textOf(n.update).trim(), hutchOf(n.update).actor.kind]);
  expect(prompts).toEqual([
    [PROMPT, "ide"],
    ["create two.txt containing yo", "user"],
    ["create three.txt containing yes", "ide"],
  ]);
  // Each turn's tool call came after its own prompt.
  const order = first.updates
    .filter((n) => n.sessionId === sessionId && ["user_message_chunk", "tool_call"].includes(n.update.sessionUpdate))
    .map((n) => n.update.sessionUpdate);
  expect(order).toEqual(["user_message_chunk", "tool_call", "user_message_chunk", "tool_call", "user_message_chunk", "tool_call"]);
}, 180_000);

test("session/cancel ends a slow turn: the prompt answers cancelled and the model's answer never came", async () => {
  fake.reset();
  fake.latencyMs = 60_000;
  try {
    const turn = first.conn.agent.request(methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "create slow.txt containing zzz" }],
    });
    await waitFor("the slow model to be asked", () => fake.modelCalls().length > 0, 60_000);
    await first.conn.agent.notify(methods.agent.session.cancel, { sessionId });
    expect((await turn).stopReason).toBe("cancelled");
    // Ended by the cancel, not by the model: no call was answered.
    expect(fake.modelCalls().filter((c) => c.reply !== undefined)).toEqual([]);
  } finally {
    fake.latencyMs = 0;
  }
  const wait = await h.run(["session", "wait", sessionId, "--json"]);
  expect(JSON.parse(wait.stdout).state).not.toBe("busy");
}, 180_000);

test("a second editor process session/loads the same session and receives its whole history, in order, before the answer, then live", async () => {
  const second = editor("other-editor");
  try {
    await initialize(second, "other-editor");
    await second.conn.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
    const loaded = second.updates.filter((n) => n.sessionId === sessionId).map(view);
    const seen = first.updates.filter((n) => n.sessionId === sessionId).map(view);
    expect(loaded.length).toBeGreaterThan(0);
    expect(loaded).toEqual(seen);
    const seqs = loaded.map((v) => v.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(loaded.filter((v) => v.update === "user_message_chunk").map((v) => v.text.trim())).toEqual([
      PROMPT,
      "create two.txt containing yo",
      "create three.txt containing yes",
      "create slow.txt containing zzz",
    ]);
    // Then live: a turn the first editor drives reaches the second as it happens, as the first's.
    const calls = () => second.updates.filter((n) => n.update.sessionUpdate === "tool_call").length;
    const before = calls();
    const r = await first.conn.agent.request(methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "create four.txt containing 4" }],
    });
    expect(r.stopReason).toBe("end_turn");
    const live = await waitFor("the live turn to reach the second editor", () =>
      second.updates.find((n) => n.update.sessionUpdate === "user_message_chunk" && textOf(n.update) === "create four.txt containing 4"),
    );
    expect(hutchOf(live.update).actor.id).toEndWith("/ide:acp.test-editor");
    await waitFor("the live turn's tool call", () => calls() === before + 1);
  } finally {
    await second.stop();
  }
}, 120_000);

test("bad input: a malformed message gets a JSON-RPC error and the session goes on; an unknown session id in session/load names the fix", async () => {
  const before = first.lines.length;
  first.raw("{this is not json");
  first.raw(JSON.stringify({ jsonrpc: "2.0", id: 9001, method: "session/prompt", params: { sessionId: 42 } }));
  await waitFor("both errors", () => first.lines.slice(before).filter((l) => l.error).length >= 2);
  const errors = first.lines.slice(before).filter((l) => l.error);
  expect(errors.map((l) => l.error!.code)).toEqual([-32700, -32602]);
  expect(errors[1]!.id).toBe(9001);

  const missing = "ses_00000000000000000000";
  const err = await first.conn.agent.request(methods.agent.session.load, { sessionId: missing, cwd, mcpServers: [] }).catch((e) => e);
  expect(err).toMatchObject({ code: -32002 });
  expect(String(err.message)).toContain("hutch session list");

  // A shell session can be loaded (its log is a session like any), not prompted: the error says what to do instead.
  const shell = JSON.parse((await h.run(["run", "--detach", "--json"])).stdout) as { id: string };
  await first.conn.agent.request(methods.agent.session.load, { sessionId: shell.id, cwd, mcpServers: [] });
  const refused = await first.conn.agent
    .request(methods.agent.session.prompt, { sessionId: shell.id, prompt: [{ type: "text", text: "ls" }] })
    .catch((e) => e);
  expect(refused).toMatchObject({ code: -32602 });
  expect(String(refused.message)).toContain(`hutch session attach ${shell.id}`);

  // The same connection still serves the session.
  const r = await first.conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "say hello" }] });
  expect(r.stopReason).toBe("end_turn");
}, 120_000);

test("an editor's folder offloaded to a box: session/new works in that box, not a new one", async () => {
  const repo = scratchDir("hutch-acp-repo-");
  newRepo(repo, { "README.md": "hello\n" });
  const off = await h.run(["offload", "--box", "acpwork", "--json"], { cwd: repo });
  expect(off.code, off.stderr).toBe(0);
  const boxes = async () => (JSON.parse((await h.run(["box", "list", "--json"])).stdout) as { name: string }[]).length;
  const before = await boxes();
  const made = await first.conn.agent.request(methods.agent.session.new, { cwd: join(repo), mcpServers: [] });
  const info = JSON.parse((await h.run(["session", "info", made.sessionId, "--json"])).stdout) as { boxName: string; agent: string };
  expect(info).toMatchObject({ boxName: "acpwork", agent: "claude" });
  expect(await boxes()).toBe(before);
  // A folder that was never offloaded gets a box of its own.
  const other = await first.conn.agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
  const otherInfo = JSON.parse((await h.run(["session", "info", other.sessionId, "--json"])).stdout) as { boxName: string };
  expect(otherInfo.boxName).not.toBe("acpwork");
}, 120_000);
