// The conversation view of the packaged extension in a real VS Code
// (code-server, tests/e2e/vscode/drive-conversation.mjs): a Claude Code
// session against the fake model API in a box this folder was offloaded to,
// driven from VS Code, from an ACP editor (the ACP SDK's client on `hutch
// acp`) and from the CLI in turn; Stop; Open Diff against the local file; a
// window reload. Keeps a screenshot at artifacts/vscode-conversation.png.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HUTCH, newRepo, ROOT, type Home } from "../helpers.ts";
import { drive, startCodeServer, type Rig } from "../vscode-rig.ts";
import { agentHome, newSecrets } from "../agent-turns.ts";
import type { FakeModel } from "../fixtures/fake-model/index.ts";

const SHOT = join(ROOT, "artifacts/vscode-conversation.png");

let h: Home;
let rig: Rig;
let fake: FakeModel;
let sid: string;
/** Where the box holds its copy of the folder. */
let guestDir: string;

beforeAll(async () => {
  ({ h, fake } = await agentHome("hutch-vsc-conv-", { anthropic: newSecrets().anthropic }, ["claude"]));
  rig = await startCodeServer(h.env);
  // The open folder is a repository offloaded to the agent's box: its edits open as diffs against the local files.
  newRepo(rig.ws, { "notes.md": "# notes\n\nold\n" });
  expect((await h.run(["box", "create", "conv-box", "--start", "--secret", "anthropic"])).code).toBe(0);
  const off = await h.run(["offload", "--box", "conv-box"], { cwd: rig.ws });
  expect(off.code, off.stderr).toBe(0);
  guestDir = (JSON.parse(readFileSync(join(rig.ws, ".git/hutch/conv-box.json"), "utf8")) as { guestDir: string }).guestDir;
  const first = await h.run(["run", "conv-box", "--agent", "claude", "--prompt", "create first.txt containing one", "--json"]);
  expect(first.code, first.stderr + first.stdout).toBe(0);
  sid = (JSON.parse(first.stdout) as { session: string }).session;
}, 300_000);

afterAll(async () => {
  await rig?.stop();
  await h?.cleanup();
  await fake?.stop();
});

test("the conversation view: VS Code, ACP and CLI turns in one log; Markdown, tool calls, a diff, Stop and a reload", async () => {
  mkdirSync(join(ROOT, "artifacts"), { recursive: true });
  const { out, err, code } = await drive(join(import.meta.dir, "vscode/drive-conversation.mjs"), {
    ...rig.env,
    BASE: rig.base,
    WS: rig.ws,
    HUTCH,
    SHOT,
    SID: sid,
    GUEST_DIR: guestDir,
    BUN: process.execPath,
    ACP_TURN: join(import.meta.dir, "vscode/acp-turn.ts"),
  });
  if (code !== 0) process.stderr.write(`failure screenshot: ${SHOT.replace(/\.png$/, "-fail.png")}\n${err}\n`);
  console.log(`screenshot: ${SHOT}`);
  expect(err).not.toContain("FAIL");
  for (const step of [
    "shows the CLI's turn",
    "a prompt typed in VS Code",
    "Open Diff shows the local notes.md",
    "Stop during a slow turn",
    "show the same 5 turns in the same order",
    "after a window reload the whole conversation is back",
    "New Conversation starts a headless Claude Code",
  ])
    expect(out).toContain(step);
  expect(code).toBe(0);
}, 600_000);
