// test: vm
// A warm pool of VM boxes on one server (tcg): two boxes booted and put to
// sleep ahead, a create that claims one (woken under a fresh id, with its own
// name and id inside), files of one claim not in another, and the pool
// booting a box again to hold two (host/src/box/pool.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { installTestImage, makeHome, qemuFor, waitFor, type Home } from "../helpers.ts";

let h: Home;

interface PoolJson {
  image: string;
  engine: string;
  wanted: number;
  ready: number;
  filling: number;
}

async function pool(): Promise<PoolJson | undefined> {
  const r = await h.run(["pool", "list", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as PoolJson[])[0];
}

async function sh(box: string, cmd: string): Promise<string> {
  const r = await h.run(["exec", box, "--", "sh", "-c", cmd]);
  if (r.code !== 0) throw new Error(`exec ${cmd} in ${box}: ${r.code} ${r.stderr}`);
  return r.stdout.trim();
}

/** Who the guest is: its hostname, its HUTCH_BOX_ID, and the name and id its kernel was booted with. */
async function identity(box: string): Promise<{ hostname: string; id: string; bootedAs: string; bootedId: string }> {
  const [hostname, id, cmdline] = (await sh(box, "hostname; echo $HUTCH_BOX_ID; cat /proc/cmdline")).split("\n");
  return {
    hostname: hostname!,
    id: id!,
    bootedAs: /hutch\.box=(\S+)/.exec(cmdline!)?.[1] ?? "",
    bootedId: /hutch\.id=(\S+)/.exec(cmdline!)?.[1] ?? "",
  };
}

async function create(name: string): Promise<string> {
  const r = await h.run(["box", "create", name, "--image", "default", "--memory", "768M", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  const box = JSON.parse(r.stdout) as { id: string; state: string };
  expect(box.state).toBe("running");
  return box.id;
}

beforeAll(async () => {
  h = makeHome("hutch-vmpool-");
  Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg" });
  await installTestImage(h, { sharedBooted: false });
}, 900_000);
afterAll(() => h.cleanup(), 300_000);

describe("a warm pool of VM boxes", () => {
  let first = "";
  let firstBootedId = "";

  test("pool set boots two boxes in the background and puts them to sleep; box list does not show them", async () => {
    const r = await h.run(["pool", "set", "default", "--warm", "2", "--memory", "768M"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("filling in the background");
    await waitFor("two ready", async () => (await pool())?.ready === 2, 600_000);
    expect(await pool()).toMatchObject({ image: "default", engine: "qemu", wanted: 2, ready: 2, filling: 0 });
    const list = await h.run(["box", "list", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([]);
  }, 700_000);

  test("a create claims one: running at once under a fresh id, the guest takes its name and id, and the pool boots another", async () => {
    first = await create("first");
    const who = await identity("first");
    // Booted as the pool's box, and that box's name and id are not the new box's.
    expect(who.bootedAs).toStartWith("pool-");
    expect(who.bootedId).not.toBe(first);
    expect(who).toMatchObject({ hostname: "first", id: first });
    firstBootedId = who.bootedId;
    expect(qemuFor(first)).toHaveLength(1);
    expect(qemuFor(who.bootedId)).toEqual([]);
    await sh("first", "echo mine > /workspace/secret");
    await waitFor("the pool refilled to two", async () => (await pool())?.ready === 2, 600_000);
  }, 700_000);

  test("a second claim is another VM: the first one's files are not there", async () => {
    const second = await create("second");
    const who = await identity("second");
    expect(who).toMatchObject({ hostname: "second", id: second });
    expect(who.bootedAs).toStartWith("pool-");
    expect(who.bootedId).not.toBe(firstBootedId);
    expect(await sh("second", "ls -A /workspace")).toBe("");
    expect(await sh("first", "cat /workspace/secret")).toBe("mine");
    const names = (JSON.parse((await h.run(["box", "list", "--json"])).stdout) as { name: string }[]).map((b) => b.name);
    expect(names.sort()).toEqual(["first", "second"]);
    // The pool goes: the box it was booting to refill is thrown away once booted, and no VM outlives the test.
    expect((await h.run(["pool", "clear", "default"])).code).toBe(0);
    const boxes = join(h.home, "boxes");
    await waitFor("the pool's boxes gone", () => readdirSync(boxes).sort().join() === [first, second].sort().join(), 240_000);
  }, 400_000);
});
