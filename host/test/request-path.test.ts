// What a request verb evaluates before it connects. `hutch exec B -- true`
// is ~12 ms end to end, and the schema library with every schema built at
// load costs ~5-7 ms of it: the round trip doubled when the remotes module
// (which checks remotes.json against its schema) was loaded by every verb
// (scripts/bench/README.md, cli.ts). Each case runs in a fresh process, so
// the modules it lists are the ones that path loaded.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const src = join(import.meta.dir, "../src");
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** In a fresh process: loads the CLI, the exec, box and session verbs (`session list` and the like read no events), and connects to a home with no daemon; prints what was loaded and how connecting ended. */
async function requestPath(env: Record<string, string>): Promise<{ loaded: string[]; error: string }> {
  const dir = mkdtempSync(join(tmpdir(), "hutch-request-path-"));
  dirs.push(dir);
  const home = join(dir, "home");
  mkdirSync(home, { mode: 0o700 });
  const script = `
    await import(${JSON.stringify(join(src, "cli/main.ts"))});
    await import(${JSON.stringify(join(src, "cli/exec.ts"))});
    await import(${JSON.stringify(join(src, "cli/box.ts"))});
    await import(${JSON.stringify(join(src, "cli/session.ts"))});
    const { connectDaemon } = await import(${JSON.stringify(join(src, "client/daemon.ts"))});
    let error = "";
    try { await connectDaemon(${JSON.stringify(home)}, { start: false }); } catch (e) { error = e.message; }
    console.log(JSON.stringify({ loaded: Object.keys(require.cache), error }));`;
  const { HUTCH_REMOTE: _, ...rest } = process.env;
  const p = Bun.spawn([process.execPath, "-e", script], {
    env: { ...rest, XDG_CONFIG_HOME: join(dir, "config"), ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`exit ${code}: ${err}`);
  return JSON.parse(out);
}

const schemaModules = (loaded: string[]) =>
  loaded.filter((f) => f.includes("@sinclair/typebox") || /shared\/src\/(index|api|validate)\.ts$/.test(f));

describe("a request verb's path to the daemon", () => {
  test("with no remote it loads no schema library, not the remotes module and no remote transport", async () => {
    const r = await requestPath({});
    expect(r.error).toContain("no daemon answers");
    expect(schemaModules(r.loaded)).toEqual([]);
    expect(r.loaded.filter((f) => /client\/(remotes|transport|failover)\.ts$/.test(f))).toEqual([]);
  });

  test("HUTCH_REMOTE=local is the home's daemon, remotes module unloaded", async () => {
    const r = await requestPath({ HUTCH_REMOTE: "local" });
    expect(r.error).toContain("no daemon answers");
    expect(r.loaded.filter((f) => f.endsWith("client/remotes.ts"))).toEqual([]);
  });

  test("a remotes file is still read and checked against its schema", async () => {
    const config = mkdtempSync(join(tmpdir(), "hutch-request-path-config-"));
    dirs.push(config);
    mkdirSync(join(config, "hutch"));
    writeFileSync(join(config, "hutch", "remotes.json"), JSON.stringify({ remotes: { web: { url: 42 } }, default: "web" }));
    const r = await requestPath({ XDG_CONFIG_HOME: config });
    expect(r.error).toContain("remotes.json");
    expect(r.loaded.some((f) => f.endsWith("client/remotes.ts"))).toBe(true);
  });
});
