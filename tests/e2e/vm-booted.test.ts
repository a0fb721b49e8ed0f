// test: vm
// Booted states (host/src/engine/qemu/booted.ts), in a home of its own under
// tcg: the second box of a shape to boot has a state of that shape made in
// the background; the boxes after it load that state on their first start
// instead of booting, each as itself (name, id, its own random numbers, its
// own files); a restart boots from the box's own disk; and a state QEMU will
// not load is removed and the box boots.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { installTestImage, makeHome, waitFor, type Home } from "../helpers.ts";

let h: Home;
let store = "";

async function sh(box: string, cmd: string): Promise<string> {
  const r = await h.run(["exec", box, "--", "sh", "-c", cmd]);
  if (r.code !== 0) throw new Error(`exec ${cmd} in ${box}: ${r.code} ${r.stderr}`);
  return r.stdout.trim();
}

async function create(name: string): Promise<string> {
  const r = await h.run(["box", "create", name, "--engine", "qemu", "--memory", "768M", "--start", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { id: string }).id;
}

/** The name the guest's kernel was booted with: the box's own after a boot, the state's maker after a load. */
async function bootedAs(box: string): Promise<string> {
  return /hutch\.box=(\S+)/.exec(await sh(box, "cat /proc/cmdline"))?.[1] ?? "";
}

/** How often the box's kernel logged a reseed for a VM fork (vmgenid: a new generation id, as after a load). */
async function forks(box: string): Promise<number> {
  const r = await h.run(["exec", box, "--user", "root", "--", "dmesg"]);
  if (r.code !== 0) throw new Error(`dmesg in ${box}: ${r.code} ${r.stderr}`);
  return r.stdout.split("\n").filter((l) => l.includes("crng reseeded due to virtual machine fork")).length;
}

/** The states kept in the home's store. */
const kept = () => (existsSync(store) ? readdirSync(store).filter((n) => !n.startsWith(".")) : []);

beforeAll(async () => {
  h = makeHome("hutch-vmbooted-");
  Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg" });
  await installTestImage(h, { sharedBooted: false });
  store = join(h.home, "images", ".booted");
}, 900_000);
afterAll(() => h.cleanup(), 300_000);

describe("booted states of VM boxes", () => {
  test("the first box of a shape boots and wants nothing; the second boots, and a state of its shape is made in the background", async () => {
    await create("b1");
    expect(await bootedAs("b1")).toBe("b1");
    expect(kept()).toEqual([]);
    await create("b2");
    expect(await bootedAs("b2")).toBe("b2");
    await waitFor("a booted state kept", () => kept().length === 1, 300_000);
    // The box it was made with is gone: not listed, no files.
    const names = (JSON.parse((await h.run(["box", "list", "--json"])).stdout) as { name: string }[]).map((b) => b.name);
    expect(names.sort()).toEqual(["b1", "b2"]);
    await waitFor("the maker's files gone", () => readdirSync(join(h.home, "boxes")).length === 2, 60_000);
  }, 600_000);

  test("the boxes after it load the state: each is itself (name, id, random numbers, files) and the state stays for the next", async () => {
    const id3 = await create("b3");
    const id4 = await create("b4");
    for (const [box, id] of [
      ["b3", id3],
      ["b4", id4],
    ] as const) {
      expect(await bootedAs(box)).toStartWith("booted-");
      expect(await sh(box, "hostname; echo $HUTCH_BOX_ID")).toBe(`${box}\n${id}`);
    }
    // Copies of one memory, with random numbers of their own: each kernel saw a new VM generation id as it was
    // loaded and reseeded its random numbers (which a booted box never logs). The numbers read differ too, but
    // that alone proves little: a guest this young reseeds every few seconds anyway.
    for (const box of ["b3", "b4"]) expect(await forks(box), box).toBeGreaterThanOrEqual(1);
    expect(await forks("b1")).toBe(0);
    const [r3, r4] = await Promise.all(["b3", "b4"].map((b) => sh(b, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'")));
    expect(r3).toMatch(/^[0-9a-f]{64}$/);
    expect(r3).not.toBe(r4);
    await sh("b3", "echo mine > /workspace/m.txt");
    expect(await sh("b4", "ls -A /workspace")).toBe("");
    expect(kept()).toHaveLength(1);
    // A restart boots from the box's own disk, which has its files.
    expect((await h.run(["box", "stop", "b3"])).code).toBe(0);
    expect((await h.run(["box", "start", "b3"])).code).toBe(0);
    expect(await bootedAs("b3")).toBe("b3");
    expect(await sh("b3", "cat /workspace/m.txt")).toBe("mine");
  }, 600_000);

  test("a state QEMU will not load is removed, and the box boots", async () => {
    const [key] = kept();
    writeFileSync(join(store, key!, "sleep.state"), "QEVM\0\0\0\x03 torn");
    await create("b5");
    expect(await bootedAs("b5")).toBe("b5");
    expect(await sh("b5", "hostname")).toBe("b5");
    expect(kept()).toEqual([]);
    for (const b of ["b1", "b2", "b3", "b4", "b5"]) expect((await h.run(["box", "delete", b])).code).toBe(0);
  }, 600_000);
});
