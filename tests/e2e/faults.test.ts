// A guest that breaks the protocol costs only its own box: the host drops
// that channel, marks the box failed with a clear reason, and keeps serving.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, boxPids, makeHome, waitFor, type Home } from "../helpers.ts";

let h: Home;
let fixtureDir: string;

async function info(name: string): Promise<{ id: string; state: string; reason?: string }> {
  const r = await h.run(["box", "info", name, "--json"]);
  return JSON.parse(r.stdout);
}

beforeAll(async () => {
  fixtureDir = mkdtempSync(join(tmpdir(), "hutch-faulty-"));
  const bin = join(fixtureDir, "faulty-guest");
  const build = Bun.spawnSync(["bun", "build", "--compile", join(ROOT, "tests/fixtures/faulty-guest.ts"), "--outfile", bin], {
    stdout: "pipe",
    stderr: "pipe",
  });
  if (build.exitCode !== 0) throw new Error(build.stderr.toString());
  h = makeHome();
  Object.assign(h.env, { HUTCH_GUEST_BIN: bin, HUTCH_HELLO_TIMEOUT_MS: "2000" });
  const good = await h.run(["box", "create", "good", "--start"]);
  expect(good.code).toBe(0);
});
afterAll(async () => {
  await h.cleanup();
  rmSync(fixtureDir, { recursive: true, force: true });
});

const goodStillServes = async () => {
  const r = await h.run(["exec", "good", "--", "echo", "alive"]);
  expect(r.stdout).toBe("alive\n");
  expect(r.code).toBe(0);
};

describe("a misbehaving guest", () => {
  test("garbage instead of a hello: start fails, box failed, reason named", async () => {
    const r = await h.run(["box", "create", "bad-garbage", "--start"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("protocol error before hello");
    expect(await info("bad-garbage")).toMatchObject({ state: "failed" });
    await goodStillServes();
  });

  test("no hello at all: times out, box failed, says so", async () => {
    const r = await h.run(["box", "create", "bad-nohello", "--start"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("never sent its hello");
    const b = await info("bad-nohello");
    expect(b.state).toBe("failed");
    expect(b.reason).toContain("never sent its hello");
    await goodStillServes();
  });

  test("a hello of another protocol version is refused", async () => {
    const r = await h.run(["box", "create", "bad-badhello", "--start"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/hello is malformed|protocol 99/);
    await goodStillServes();
  });

  test("a frame over the size cap after hello: channel dropped, box failed", async () => {
    const r = await h.run(["box", "create", "bad-oversize", "--start"]);
    expect(r.code).toBe(0);
    const b = await waitFor("bad-oversize to fail", async () => {
      const i = await info("bad-oversize");
      return i.state === "failed" ? i : null;
    });
    expect(b.reason).toContain("outside 10..");
    const e = await h.run(["exec", "bad-oversize", "--", "true"]);
    expect(e.code).toBe(4);
    expect(e.stderr).toContain("failed");
    expect(e.stderr).toContain("hutch box start bad-oversize");
    await goodStillServes();
  });

  test("garbage after hello: channel dropped, box failed, its processes gone", async () => {
    const r = await h.run(["box", "create", "bad-latergarbage", "--start"]);
    expect(r.code).toBe(0);
    const b = await waitFor("bad-latergarbage to fail", async () => {
      const i = await info("bad-latergarbage");
      return i.state === "failed" ? i : null;
    });
    expect(b.reason).toContain("broke the protocol");
    expect(boxPids(b.id)).toEqual([]);
    await goodStillServes();
  });

  test("a failed box can be deleted and leaves nothing", async () => {
    const r = await h.run(["box", "delete", "bad-garbage", "bad-nohello"]);
    expect(r.code).toBe(0);
    const list = await h.run(["box", "list", "--json"]);
    expect(JSON.parse(list.stdout).map((b: { name: string }) => b.name)).not.toContain("bad-garbage");
  });
});
