// `hutch --remote srv acp`: the editor's agent is a client of a server's
// daemon, like the CLI. Its session and box are the server's, its actor the
// token's user with the editor's name, and a real Claude Code runs there
// against the fake model API (loopback).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { methods } from "@agentclientprotocol/sdk";
import { type Home, scratchDir } from "../helpers.ts";
import { fakeBindings, newSecrets, PROMPT } from "../agent-turns.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";
import { joinClient, startServer, type Server } from "../remote.ts";
import { type Editor, editor, hutchOf, initialize } from "../acp-editor.ts";

const AGENTS_DIR = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
let fake: FakeModel;
let srv: Server;
let alice: Home & { join: string };
let zed: Editor | undefined;

beforeAll(async () => {
  fake = await startFakeModel();
  srv = await startServer("hutch-srv-acp-", { config: fakeBindings(fake), env: { HUTCH_AGENTS_DIR: AGENTS_DIR } });
  alice = await joinClient(srv, "alice");
  const set = await alice.run(["secret", "set", "anthropic"], { stdin: newSecrets().anthropic });
  expect(set.code, set.stderr).toBe(0);
  // Installing agent CLIs is the server admin's (its local socket).
  const install = await srv.home.run(["agent", "install", "claude"]);
  expect(install.code, install.stderr).toBe(0);
}, 600_000);

afterAll(async () => {
  await zed?.stop();
  await alice?.cleanup();
  await srv?.stop();
  await fake?.stop();
});

test("an editor's session and its turn run on the remote daemon, as the token's user; the local daemon has none", async () => {
  zed = editor(alice, "zed");
  await initialize(zed, "Zed");
  const { sessionId } = await zed.conn.agent.request(methods.agent.session.new, {
    cwd: scratchDir("hutch-acp-remote-"),
    mcpServers: [],
  });
  const r = await zed.conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: PROMPT }] });
  expect(r.stopReason).toBe("end_turn");
  const prompt = zed.updates.find((n) => n.update.sessionUpdate === "user_message_chunk")!;
  expect(hutchOf(prompt.update).actor).toEqual({ kind: "ide", id: "alice/ide:acp.zed" });
  expect(zed.updates.some((n) => n.update.sessionUpdate === "tool_call")).toBe(true);

  // Read back through the remote (the server answers for alice's own), and the file is in the server's box.
  const there = await alice.run(["session", "info", sessionId, "--json"]);
  expect(there.code, there.stderr).toBe(0);
  const box = (JSON.parse(there.stdout) as { boxName: string }).boxName;
  expect((await alice.run(["exec", box, "--", "cat", "/workspace/hello.txt"])).stdout).toBe("hi");
  const here = await alice.run(["--remote", "local", "session", "list", "--json"]);
  expect(JSON.parse(here.stdout)).toEqual([]);
}, 180_000);
