// The packaged extension in code-server pointed at a remote (its hutch.remote
// setting): a daemon serving TLS on loopback from its own home, a client that
// joined it, and VS Code showing the remote's boxes and sessions, the live log
// with an annotation, and attach. Keeps a screenshot at artifacts/vscode-remote.png.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { HUTCH, ROOT, type Home } from "../helpers.ts";
import { joinClient, startServer, type Server } from "../remote.ts";
import { drive, startCodeServer, type Rig } from "../vscode-rig.ts";

const SHOT = join(ROOT, "artifacts/vscode-remote.png");

let srv: Server;
let client: Home;
let rig: Rig;

beforeAll(async () => {
  srv = await startServer();
  client = await joinClient(srv, "alice");
  const box = await client.run(["box", "create", "rbox", "--start"]);
  expect(box.code, box.stderr).toBe(0);
  // The setting alone points the extension at the remote: code-server's environment names none.
  const { HUTCH_REMOTE: _, ...env } = client.env;
  rig = await startCodeServer(env, { "hutch.remote": "srv" });
  // A repository with one unstaged change, to offload to the remote.
  for (const args of [
    ["init", "-q", "-b", "main"],
    ["add", "src/main.ts"],
    ["commit", "-q", "-m", "start"],
  ]) {
    const g = Bun.spawnSync(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd: rig.ws, stderr: "pipe" });
    expect(g.exitCode, String(g.stderr)).toBe(0);
  }
  appendFileSync(join(rig.ws, "src/main.ts"), "export const changed = true;\n");
}, 180_000);

afterAll(async () => {
  await rig?.stop();
  await client?.cleanup();
  await srv?.stop();
});

test("the extension on a remote: status bar, sidebar, live log with an annotation, attach", async () => {
  mkdirSync(join(ROOT, "artifacts"), { recursive: true });
  const { out, err, code } = await drive(join(import.meta.dir, "vscode/drive-remote.mjs"), {
    ...rig.env,
    BASE: rig.base,
    WS: rig.ws,
    HUTCH,
    REMOTE: "srv",
    SHOT,
  });
  expect(err).not.toContain("FAIL");
  for (const step of [
    'the status bar names the remote "srv"',
    "is in the sidebar, running",
    "appears under its box",
    "log opens and replays",
    "appears in the live log",
    "attach to the remote session shows the shell prompt",
    "offload to the remote chosen in the picker made box roff there",
    "bring back from the remote's box: fast-forward, the file is home",
  ])
    expect(out).toContain(step);
  expect(code).toBe(0);
}, 300_000);
