// The end-to-end tier: the guest as it ships, a `bun build --compile` binary,
// serving a connection. Proves the xterm modules load inside the binary.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, collect, connect, startGuest, type Guest } from "./harness.ts";

let outDir: string;
let binary: string;
let g: Guest;
beforeAll(async () => {
  outDir = await mkdtemp(join(tmpdir(), "hutch-guest-bin-"));
  binary = join(outDir, "hutch-guest");
  const build = Bun.spawnSync(
    [process.execPath, "build", "--compile", "--minify", join(import.meta.dir, "../src/main.ts"), "--outfile", binary],
    { stdout: "pipe", stderr: "pipe" },
  );
  if (build.exitCode !== 0) throw new Error(`bun build failed: ${build.stderr.toString()}`);
  g = await startGuest([binary]);
}, 60000);
afterAll(async () => {
  await g?.stop();
  await rm(outDir, { recursive: true, force: true });
});

describe("compiled hutch-guest", () => {
  test("answers the hello, runs exec, and replays a PTY screen on attach", async () => {
    const h = await connect(g.socket);
    expect(await h.hello).toMatchObject({ protocol: 1, agent: "hutch-guest", version: "0.1.0" });
    expect((await call(h, { tool: "exec", argv: ["echo", "from the binary"] })).c.text()).toBe("from the binary\n");

    const s = h.mux.open({ tool: "pty.open", argv: ["sh"], cols: 80, rows: 24 });
    const c = collect(s);
    const { pty } = (await c.waitMsg("started")) as { pty: string };
    s.write(0, new TextEncoder().encode("echo screen-$((3*3))\r"));
    await c.waitFor(/screen-9/);
    s.close();
    const a = collect(h.mux.open({ tool: "pty.attach", id: pty }));
    await a.waitFor(/screen-9/);
    await call(h, { tool: "pty.kill", id: pty, signal: "KILL" });
    expect(await a.closed).toBeUndefined();
    h.close();
  });
});
