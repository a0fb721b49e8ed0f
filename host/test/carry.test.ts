// A carried VM box's pieces that need no VM (tests/e2e/fleet-vm-move.test.ts
// boots one): reading a saved QEMU command line back into its layout, proven by
// rebuilding it; the refusal of one this version does not build; and the
// registry row a carried box lands as.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readVmLayout, vmArgv, type VmFiles, type VmLayout } from "../src/engine/qemu/carry.ts";
import { BoxStore } from "../src/store/boxes.ts";
import { BrokerStore } from "../src/store/broker.ts";
import { openDb } from "../src/store/db.ts";

const temp = mkdtempSync(join(tmpdir(), "hutch-carry-"));
afterAll(() => rmSync(temp, { recursive: true, force: true }));

const ID = "box_0000000000aaaaaaaaaa";
let n = 0;
function boxDir(): string {
  const dir = join(temp, `home${++n}`, "boxes", ID);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const layout: VmLayout = {
  platform: "linux",
  arch: "x86_64",
  accel: "tcg",
  cpus: 2,
  memoryMiB: 768,
  cmdline: "loglevel=7",
  imageHasPmem: true,
  guestDiskBytes: 130 * 1024 * 1024,
  agentDisks: [{ name: "claude-2.0.1", bytes: 64 * 1024 * 1024 }],
};
const files: VmFiles = {
  kernel: "/h/images/default/vmlinuz",
  initrd: "/h/images/default/initramfs.img",
  guestDisk: "/h/guest/abc/guest.v3.img",
  agentDisks: ["/h/agents/claude-2.0.1.v2.img"],
};
const config = { cpus: 2, memoryMiB: 768, kernelArgs: "loglevel=7", image: "default" };

describe("a VM's saved command line, read back", () => {
  test("gives the layout and files it was built from, with and without a host uid to drop to", () => {
    for (const runAs of [null, { uid: 1_000_001_000, gid: 1_000_001_000 }]) {
      const dir = boxDir();
      const argv = vmArgv({ id: ID, name: "web", dir }, layout, files, runAs);
      writeFileSync(join(dir, "qemu.argv.json"), JSON.stringify(argv));
      const read = readVmLayout({ id: ID, name: "web", dir, config });
      expect(read.layout).toEqual(layout);
      expect(read.files).toEqual(files);
      expect(read.argv).toEqual(argv);
      // The same VM for another home: only the paths differ, every device the same.
      const there = vmArgv(
        { id: ID, name: "web", dir: "/other/boxes/box_0000000000aaaaaaaaaa" },
        layout,
        { ...files, kernel: "/other/k" },
        runAs,
      );
      expect(there.length).toBe(argv.length);
      const differ = there.flatMap((a, i) => (a === argv[i] ? [] : [i]));
      expect(differ.every((i) => argv[i]!.includes(temp) || argv[i] === files.kernel)).toBe(true);
    }
  });

  test("a guest disk attached as a raw drive is measured on the host", () => {
    const dir = boxDir();
    const guestDisk = join(dir, "..", "guest.img");
    writeFileSync(guestDisk, new Uint8Array(4096 * 3));
    const blk = { ...layout, imageHasPmem: false, guestDiskBytes: 4096 * 3, agentDisks: [] };
    writeFileSync(
      join(dir, "qemu.argv.json"),
      JSON.stringify(vmArgv({ id: ID, name: "web", dir }, blk, { ...files, guestDisk, agentDisks: [] }, null)),
    );
    expect(readVmLayout({ id: ID, name: "web", dir, config }).layout).toEqual(blk);
  });

  test("one this version would not build, or none, is refused naming the way out", () => {
    const dir = boxDir();
    const argv = vmArgv({ id: ID, name: "web", dir }, layout, files, null);
    // A command line from a version with another CPU model: its state would not load into what this one builds.
    writeFileSync(join(dir, "qemu.argv.json"), JSON.stringify(argv.map((a) => (a === "max" ? "Haswell" : a))));
    expect(() => readVmLayout({ id: ID, name: "web", dir, config })).toThrow(/differs from what this version builds/);
    // Config changed behind its back: the kernel arguments it ran with are not the box's.
    writeFileSync(join(dir, "qemu.argv.json"), JSON.stringify(argv));
    expect(() => readVmLayout({ id: ID, name: "web", dir, config: { ...config, kernelArgs: "" } })).toThrow(/differs/);
    rmSync(join(dir, "qemu.argv.json"));
    const err = (() => {
      try {
        readVmLayout({ id: ID, name: "web", dir, config });
      } catch (e) {
        return e as Error & { hint?: string };
      }
    })();
    expect(err?.message).toContain("is missing");
    expect(err?.hint).toContain("hutch box wake web");
  });
});

describe("a carried box's row", () => {
  test("lands asleep under its own id with its whole policy and owner, once; a name or id in use is a conflict", () => {
    const db = openDb(":memory:");
    const rows = new BoxStore(db);
    const broker = new BrokerStore(db);
    const box = { id: ID, name: "web", engine: "qemu" as const, config, createdAt: "2026-12-01T00:00:00.000Z" };
    const policy = {
      allow: ["example.com"],
      bindings: ["anthropic"],
      stubs: { anthropic: "hutch-stub-anthropic-x" },
      unlisted: "ask" as const,
    };
    const row = rows.insertCarried(box, policy, "ann");
    expect([row.id, row.name, row.state, row.desired, row.created_at]).toEqual([ID, "web", "asleep", "asleep", box.createdAt]);
    expect(JSON.parse(row.config)).toEqual(config);
    expect(broker.policy(ID)).toEqual(policy);
    expect((db.query("SELECT owner FROM box_owners WHERE box_id = ?").get(ID) as { owner: string }).owner).toBe("ann");
    expect(rows.insertCarried(box, policy, "ann").id).toBe(ID);
    expect(rows.countRows(ID)).toBe(3);
    const other = rows.insertBox("api", "qemu", "stopped", null).box;
    expect(() => rows.insertCarried({ ...box, id: other.id }, policy)).toThrow(/exists here already, as "api"/);
    expect(() => rows.insertCarried({ ...box, id: "box_0000000000bbbbbbbbbb", name: "api" }, policy)).toThrow(/"api" already exists here/);
    expect(rows.byId("box_0000000000bbbbbbbbbb")).toBeNull();
    db.close();
  });
});
