// Booted states (engine/qemu/booted.ts) without a VM: which command lines
// share a key, the store's whole-or-absent writes, the second-sighting mark,
// and the prune. tests/e2e/vm-booted.test.ts loads real ones under tcg.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { qemuArgs, type QemuSpec } from "../src/engine/qemu/args.ts";
import { bootedKey, dropBooted, findBooted, keepBooted, listBooted, pruneBooted, seenBooted } from "../src/engine/qemu/booted.ts";

const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});
const tempHome = () => {
  const d = mkdtempSync(join(tmpdir(), "hutch-booted-"));
  made.push(d);
  return d;
};

/** A box's command line as the engine makes it, for a home, a box and a shape. */
function argvOf(home: string, id: string, name: string, shape: Partial<QemuSpec> = {}): string[] {
  const dir = join(home, "boxes", id);
  return qemuArgs({
    platform: "linux",
    arch: "x86_64",
    accel: "tcg",
    boxId: id,
    name,
    cpus: 2,
    memoryMiB: 768,
    kernel: join(home, "images/default/vmlinuz"),
    initrd: join(home, "images/default/initramfs.img"),
    cmdline: "",
    rootDisk: join(dir, "disk.qcow2"),
    guestDisk: join(home, "guest/abc/guest.v1.img"),
    guestDiskBytes: 136314880,
    imageHasPmem: true,
    agent: join(dir, "agent.sock"),
    qmp: join(dir, "qmp.sock"),
    consoleLog: join(dir, "console.log"),
    pidfile: join(dir, "qemu.pid"),
    runAs: { uid: 100123, gid: 100123 },
    rootDiskFds: [3, 4],
    ...shape,
  });
}

const who = (home: string, id: string, name: string) => ({ home, dir: join(home, "boxes", id), id, name });
const MANIFEST = '{"version":1,"kernel":"6.1"}';

describe("the key", () => {
  test("two boxes of one shape share it whatever their names, ids, homes and uids; any device, memory, image or disk size changes it", () => {
    const a = bootedKey(
      argvOf("/h1", "box_aaaaaaaaaaaaaaaaaaaa", "web"),
      who("/h1", "box_aaaaaaaaaaaaaaaaaaaa", "web"),
      MANIFEST,
      undefined,
    );
    const b = bootedKey(
      argvOf("/tmp/other-home", "box_bbbbbbbbbbbbbbbbbbbb", "a-much-longer-name", { runAs: { uid: 100999, gid: 100999 } }),
      who("/tmp/other-home", "box_bbbbbbbbbbbbbbbbbbbb", "a-much-longer-name"),
      MANIFEST,
      undefined,
    );
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(b).toBe(a);
    const other = (shape: Partial<QemuSpec>, manifest = MANIFEST, disk?: string) =>
      bootedKey(argvOf("/h1", "box_cccccccccccccccccccc", "web", shape), who("/h1", "box_cccccccccccccccccccc", "web"), manifest, disk);
    expect(other({ memoryMiB: 1024 })).not.toBe(a);
    expect(other({ cpus: 1 })).not.toBe(a);
    expect(other({ cmdline: "quiet=0" })).not.toBe(a);
    expect(other({ guestDisk: "/h1/guest/def/guest.v1.img" })).not.toBe(a);
    expect(other({ agentDisks: [{ name: "claude-1", path: "/var/tmp/agents/claude.img", bytes: 4096 }] })).not.toBe(a);
    expect(other({}, '{"version":1,"kernel":"6.2"}')).not.toBe(a);
    expect(other({}, MANIFEST, "20G")).not.toBe(a);
  });

  test("no key where the VM has no vmgenid (kvm's microvm, arm64's virt): its copies would share their random numbers", () => {
    expect(
      bootedKey(
        argvOf("/h", "box_aaaaaaaaaaaaaaaaaaaa", "w", { accel: "kvm" }),
        who("/h", "box_aaaaaaaaaaaaaaaaaaaa", "w"),
        MANIFEST,
        undefined,
      ),
    ).toBeNull();
    expect(
      bootedKey(
        argvOf("/h", "box_aaaaaaaaaaaaaaaaaaaa", "w", { arch: "aarch64", accel: "hvf", platform: "darwin" }),
        who("/h", "box_aaaaaaaaaaaaaaaaaaaa", "w"),
        MANIFEST,
        undefined,
      ),
    ).toBeNull();
  });
});

/** An asleep box's files as the engine leaves them. */
function asleepBox(home: string, name: string, state = "QEVM state"): { dir: string; name: string; state: string; disk: string } {
  const dir = join(home, "boxes", name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "sleep.state"), state);
  writeFileSync(join(dir, "disk.qcow2"), `disk of ${name}`);
  return { dir, name, state: join(dir, "sleep.state"), disk: join(dir, "disk.qcow2") };
}

describe("the store", () => {
  test("a kept state moves out of the box and is found whole; a second of the same key is not kept and its files go", () => {
    const home = tempHome();
    const key = "k".repeat(32);
    expect(findBooted(home, key)).toBeNull();
    const one = asleepBox(home, "one", "first");
    expect(keepBooted(home, key, one, one)).toBe(true);
    expect(existsSync(one.state) || existsSync(one.disk)).toBe(false);
    const found = findBooted(home, key)!;
    expect(Bun.file(found.state).size).toBe("first".length);
    const two = asleepBox(home, "two", "second");
    expect(keepBooted(home, key, two, two)).toBe(false);
    expect(Bun.file(findBooted(home, key)!.state).size).toBe("first".length);
    // No staging left behind either way.
    expect(readdirSync(join(home, "images/.booted")).filter((n) => n.startsWith(".staging-"))).toEqual([]);
    dropBooted(home, key);
    expect(findBooted(home, key)).toBeNull();
  });

  test("a state with a file missing is not found (half-removed by a prune elsewhere)", () => {
    const home = tempHome();
    const key = "m".repeat(32);
    const b = asleepBox(home, "b");
    expect(keepBooted(home, key, b, b)).toBe(true);
    rmSync(join(home, "images/.booted", key, "disk.qcow2"));
    expect(findBooted(home, key)).toBeNull();
  });

  test("the second box of a shape to boot wants a state, the first does not; a kept state clears the mark", () => {
    const home = tempHome();
    const key = "s".repeat(32);
    expect(seenBooted(home, key)).toBe(false);
    expect(seenBooted(home, key)).toBe(true);
    const b = asleepBox(home, "b");
    expect(keepBooted(home, key, b, b)).toBe(true);
    dropBooted(home, key);
    expect(seenBooted(home, key)).toBe(false);
  });

  test("the prune keeps the most recently used and removes the rest, and staging a killed daemon left", () => {
    const home = tempHome();
    const keys: string[] = ["a", "b", "c", "d"].map((c) => c.repeat(32));
    keys.forEach((key, i) => {
      const b = asleepBox(home, `b${i}`);
      expect(keepBooted(home, key, b, b)).toBe(true);
      const t = new Date(Date.now() - (10 - i) * 60_000);
      utimesSync(join(home, "images/.booted", key), t, t);
    });
    // Using the oldest makes it the newest.
    expect(findBooted(home, keys[0]!)).not.toBeNull();
    mkdirSync(join(home, "images/.booted/.staging-999999999-x"));
    expect(pruneBooted(home, 2).sort()).toEqual([keys[1]!, keys[2]!].sort());
    expect(
      listBooted(home)
        .map((b) => b.key)
        .sort(),
    ).toEqual([keys[0]!, keys[3]!].sort());
    expect(existsSync(join(home, "images/.booted/.staging-999999999-x"))).toBe(false);
  });
});
