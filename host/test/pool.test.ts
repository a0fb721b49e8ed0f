// Warm pools without a VM: the process engine's boxes (a sleep keeps their
// disk), through the pools routes and box create (app.handle). A claim gives
// the create a pool box under a fresh id, with its own name, id and files, and
// the pool boots another; a create the pool cannot honour is made as usual.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { QemuEngine, VM_FILES } from "../src/engine/qemu/index.ts";
import { fits, poolOf, specOf, WarmPools } from "../src/box/pool.ts";
import { PoolTable } from "../src/store/pools.ts";
import { execCollect } from "../src/box/exec.ts";
import { BoxStore } from "../src/store/boxes.ts";
import { ask, testApp } from "./app-helpers.ts";

describe("which creates a pool honours", () => {
  const vm = specOf({ image: "default", warm: 2 });
  const small = specOf({ image: "default", warm: 2, cpus: 1, memoryMiB: 768 });
  const proc = specOf({ image: "default", engine: "process", warm: 1 });
  test.each([
    ["a VM of the default image", vm, "qemu", {}, true],
    ["the same, naming the image", vm, "qemu", { image: "default" }, true],
    ["another image", vm, "qemu", { image: "tools" }, false],
    ["a process box for a VM pool", vm, "process", {}, false],
    ["other memory", vm, "qemu", { memoryMiB: 2048 }, false],
    ["kernel args (a VM pool boots without)", vm, "qemu", { kernelArgs: "debug" }, false],
    ["the pool's limits", small, "qemu", { cpus: 1, memoryMiB: 768 }, true],
    ["none of the pool's limits", small, "qemu", {}, false],
    ["a process box", proc, "process", {}, true],
    ["a process box with a pids limit", proc, "process", { pids: 100 }, false],
    ["sleep settings and egress are the new box's own", vm, "qemu", { sleepAfterMs: 5000 }, true],
  ] as const)("%s", (_what, spec, engine, config, want) => {
    expect(fits(spec, engine, config)).toBe(want);
  });

  test("a process pool is of image default; a VM pool needs a VM's memory", () => {
    expect(() => specOf({ image: "tools", engine: "process", warm: 1 })).toThrow(/process boxes run on the host's own system/);
    expect(() => specOf({ image: "default", warm: 1, memoryMiB: 128 })).toThrow(/at least 256 MiB/);
  });
});

describe("a VM's move to the claiming box's id (QemuEngine.rehome)", () => {
  test("its directory moves and the saved command line names the new id wherever it named the old; a taken target is refused", async () => {
    const home = mkdtempSync(join(tmpdir(), "hutch-rehome-"));
    try {
      const engine = new QemuEngine(home);
      const handle = (id: string, name: string) => ({ id, name, dir: join(home, "boxes", id), config: {} });
      const from = handle("box_0000000000aaaaaaaaaa", "pool-0123456789abcdef");
      const to = handle("box_0000000000bbbbbbbbbb", "web");
      mkdirSync(from.dir, { recursive: true });
      const argv = [
        "qemu-system-x86_64",
        "-name",
        `hutch-${from.name},process=hutch-${from.id}`,
        "-append",
        `quiet hutch.box=${from.name} hutch.id=${from.id}`,
        "-chardev",
        `socket,id=agent,path=${join(from.dir, "agent.sock")},server=on,wait=off`,
      ];
      writeFileSync(join(from.dir, VM_FILES.argv), JSON.stringify(argv));
      writeFileSync(join(from.dir, VM_FILES.sleepState), "QEVM");
      await engine.rehome(from, to);
      expect(existsSync(from.dir)).toBe(false);
      expect(readFileSync(join(to.dir, VM_FILES.sleepState), "utf8")).toBe("QEVM");
      const moved = JSON.parse(readFileSync(join(to.dir, VM_FILES.argv), "utf8")) as string[];
      expect(moved).toEqual(argv.map((a) => a.replaceAll(from.id, to.id)));
      expect(moved.join(" ")).not.toContain(from.id);
      // Same length: the kernel command line keeps its size, and the guest still names the pool box until told.
      expect(moved[4]).toBe(`quiet hutch.box=${from.name} hutch.id=${to.id}`);
      const other = handle("box_0000000000cccccccccc", "other");
      mkdirSync(other.dir, { recursive: true });
      await expect(engine.rehome(to, other)).rejects.toThrow("exists already");
      expect(existsSync(to.dir)).toBe(true);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("a pool of process boxes", async () => {
  const t = await testApp("hutch-pool-", { server: true });
  const { boxes, pools } = t.services;
  const store = new BoxStore(t.db);
  const pooled = () => store.list().filter((r) => poolOf(r) !== null);
  const ready = async () => (await ask(t.app, "GET", "/v1/pools")).body[0]?.ready ?? 0;
  const until = async (what: string, ok: () => Promise<boolean> | boolean) => {
    const deadline = Date.now() + 60_000;
    while (!(await ok())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await Bun.sleep(50);
    }
  };
  const run = async (box: string, script: string) => {
    const { channel } = await boxes.awake(box);
    const r = await execCollect(channel, ["sh", "-c", script]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  afterAll(async () => {
    await pools.close();
    for (const r of store.list()) await boxes.delete(r.id, null);
    t.close();
  });

  test("pool set fills it in the background; its boxes are asleep and not listed", async () => {
    pools.start();
    const set = await ask(t.app, "PUT", "/v1/pools", { body: { image: "default", engine: "process", warm: 2 } });
    expect(set.status, set.text).toBe(200);
    expect(set.body[0]).toMatchObject({ image: "default", engine: "process", server: "local", wanted: 2 });
    await until("two ready", async () => (await ready()) === 2);
    expect(pooled().map((r) => r.state)).toEqual(["asleep", "asleep"]);
    expect((await ask(t.app, "GET", "/v1/boxes")).body).toEqual([]);
  });

  test("a create claims one: a fresh id, its own name and id inside, and the pool refills to 2", async () => {
    const before = pooled().map((r) => r.id);
    const made = await ask(t.app, "POST", "/v1/boxes", { body: { name: "web", engine: "process" } });
    expect(made.status, made.text).toBe(201);
    expect(made.body.state).toBe("running");
    expect(before).not.toContain(made.body.id);
    // The claimed box's files are the pool box's, moved: one of the two is gone, its directory with it.
    const left = pooled().map((r) => r.id);
    const claimed = before.filter((id) => !left.includes(id));
    expect(claimed).toHaveLength(1);
    expect(existsSync(join(t.home, "boxes", claimed[0]!))).toBe(false);
    expect(await run("web", "echo $HUTCH_BOX_ID; hostname")).toBe(`${made.body.id}\nweb`);
    expect((await ask(t.app, "GET", "/v1/boxes")).body.map((b: { name: string }) => b.name)).toEqual(["web"]);
    await until("the pool refilled", async () => (await ready()) === 2);
  });

  test("another claim does not see the first one's files", async () => {
    await run("web", "echo mine > /workspace/secret");
    const made = await ask(t.app, "POST", "/v1/boxes", { body: { name: "web2", engine: "process" } });
    expect(made.status, made.text).toBe(201);
    expect(await run("web2", "ls /workspace; echo $HUTCH_BOX_ID")).toBe(made.body.id);
    expect(await run("web", "cat /workspace/secret")).toBe("mine");
  });

  test("a create the pool cannot honour is made as usual, and leaves the pool alone", async () => {
    await until("the pool refilled", async () => (await ready()) === 2);
    const ids = pooled().map((r) => r.id);
    const made = await ask(t.app, "POST", "/v1/boxes", { body: { name: "big", engine: "process", memoryMiB: 2048 } });
    expect(made.status, made.text).toBe(201);
    expect(made.body.state).toBe("stopped");
    expect(pooled().map((r) => r.id)).toEqual(ids);
  });

  test("warm 0 removes the pool and throws its boxes away", async () => {
    const r = await ask(t.app, "PUT", "/v1/pools", { body: { image: "default", engine: "process", warm: 0 } });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual([]);
    await until("its boxes gone", () => pooled().length === 0);
    const again = await ask(t.app, "DELETE", "/v1/pools/process/default");
    expect(again.body).toEqual({ image: "default", engine: "process", cleared: false });
  });

  test("a process pool of another image is refused naming the fix, and nothing is stored", async () => {
    const r = await ask(t.app, "PUT", "/v1/pools", { body: { image: "tools", engine: "process", warm: 1 } });
    expect(r.status).toBe(400);
    expect(r.body.error.hint).toBe("hutch pool set default --engine process --warm 1");
    expect((await ask(t.app, "GET", "/v1/pools")).body).toEqual([]);
  });
});

describe("a pool whose image is rebuilt", async () => {
  const t = await testApp("hutch-pool-build-");
  const store = new BoxStore(t.db);
  let build = "build-1";
  const pools = new WarmPools({
    boxes: t.services.boxes,
    store,
    sizes: new PoolTable(t.db),
    server: "local",
    engines: ["process"],
    build: () => build,
  });
  t.services.boxes.warm = pools;
  const pooled = () => store.list().filter((r) => poolOf(r) !== null);
  const readyIds = () =>
    pooled()
      .filter((r) => r.state === "asleep" && r.desired === "asleep")
      .map((r) => r.id);
  afterAll(async () => {
    await pools.close();
    await t.services.pools.close();
    for (const r of store.list()) await t.services.boxes.delete(r.id, null);
    t.close();
  });

  test("its boxes booted on the old build are thrown away and booted again; none of them is claimed meanwhile", async () => {
    pools.start();
    await pools.set({ image: "default", engine: "process", warm: 1 });
    const waitFor = async (what: string, ok: () => boolean) => {
      const deadline = Date.now() + 60_000;
      while (!ok()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await Bun.sleep(50);
      }
    };
    await waitFor("one ready", () => readyIds().length === 1);
    const old = readyIds()[0]!;
    build = "build-2";
    // Until the refill runs, the old box is not handed out: the create is made cold.
    const cold = await t.services.boxes.create({ name: "cold", engine: "process" }, null);
    expect(cold.state).toBe("stopped");
    pools.kick();
    await waitFor("the old box replaced", () => readyIds().length === 1 && readyIds()[0] !== old);
    expect(store.byId(old)).toBeNull();
    const warm = await t.services.boxes.create({ name: "warm", engine: "process" }, null);
    expect(warm.state).toBe("running");
  });
});
