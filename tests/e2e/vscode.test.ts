// The packaged extension (dist/hutch.vsix) in a real VS Code: code-server
// from npm on loopback, driven by playwright-core in Debian's Chromium
// (tests/e2e/vscode/drive.mjs), against the real daemon the CLI talks to.
// Needs scripts/setup-vscode (run by scripts/setup-tests). Keeps a screenshot at
// artifacts/vscode.png.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HUTCH, ROOT, type Home } from "../helpers.ts";
import { drive, startCodeServer, type Rig } from "../vscode-rig.ts";
import { agentHome, newSecrets } from "../agent-turns.ts";
import type { FakeModel } from "../fixtures/fake-model/index.ts";

const SHOT = join(ROOT, "artifacts/vscode.png");

let h: Home;
let rig: Rig;
let fake: FakeModel;

beforeAll(async () => {
  // Claude Code against the fake model API in a box of its own, for the approval a person answers in VS Code.
  ({ h, fake } = await agentHome("hutch-vsc-", { anthropic: newSecrets().anthropic }, ["claude"]));
  expect((await h.run(["box", "create", "perm-box", "--start", "--secret", "anthropic"])).code).toBe(0);
  rig = await startCodeServer(h.env);
}, 300_000);

afterAll(async () => {
  await rig?.stop();
  await h?.cleanup();
  await fake?.stop();
});

test("the extension in VS Code: sidebar, live log, annotations, attach, and bad input", async () => {
  mkdirSync(join(ROOT, "artifacts"), { recursive: true });
  const old = join(rig.run, "old-hutch");
  writeFileSync(old, "#!/bin/sh\necho 0.0.1\n");
  chmodSync(old, 0o755);
  const { out, err, code } = await drive(join(import.meta.dir, "vscode/drive.mjs"), {
    ...rig.env,
    BASE: rig.base,
    WS: rig.ws,
    HUTCH,
    SHOT,
    OLD_HUTCH: old,
  });
  if (code !== 0) process.stderr.write(`failure screenshot: ${SHOT.replace(/\.png$/, "-fail.png")}\n`);
  console.log(`screenshot: ${SHOT}`);
  expect(err).not.toContain("FAIL");
  for (const step of [
    "a box created from the CLI appears in the sidebar",
    "opens the session's log every time",
    "an annotation from the CLI appears in the log",
    "shows the diagnostic on it",
    "attach shows the shell prompt",
    "named by its first command, agent and age, with no id",
    "log view shows the text a command printed",
    "100,000 events: loaded in",
    "anchor in the log opens its file at its line",
    "closes its log view with a message",
    "the agent's approval, denied in VS Code",
    "shows the welcome view",
    "recovers when the daemon is back",
    "a missing hutch binary is named with the fix",
    "a too old hutch binary is named with the fix",
  ]) {
    expect(out).toContain(step);
  }
  expect(code).toBe(0);
  expect(existsSync(SHOT)).toBe(true);
}, 300_000);
