// The upgraded root filesystem kept between image builds (image/tree-cache.ts),
// on small trees: the real debootstrap runs in the image builds the VM files use.
import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { collectBuilds } from "../src/image/store.ts";
import type { Upgrade } from "../src/image/rootfs.ts";
import { TREES, type TreeKey, treeHash, withBaseTree } from "../src/image/tree-cache.ts";
import { scratchDir } from "../../tests/helpers.ts";

const KEY: TreeKey = {
  suite: "bookworm",
  packages: ["git", "curl"],
  sources: [
    { uri: "http://deb.debian.org/debian", suite: "bookworm" },
    { uri: "http://deb.debian.org/debian", suite: "bookworm-updates" },
  ],
  updates: ["bookworm Sat, 15 Nov 2026 10:00:00 UTC", "bookworm-updates Mon, 30 Nov 2026 20:00:00 UTC"],
};
const UPGRADE: Upgrade = {
  sources: [{ uri: "http://deb.debian.org/debian", suite: "bookworm", date: "Sat, 15 Nov 2026 10:00:00 UTC" }],
  upgraded: ["libc6=2.36-9+deb12u13"],
};
const root = process.getuid?.() === 0;

/** A stand-in for debootstrap and the upgrade: a small tree with what a root filesystem has (a setuid file, a link, a user's directory). */
function maker(rootfs: string, mark: string) {
  const calls = { n: 0 };
  const make = async (): Promise<Upgrade> => {
    calls.n++;
    mkdirSync(join(rootfs, "etc/apt"), { recursive: true });
    mkdirSync(join(rootfs, "usr/bin"), { recursive: true });
    mkdirSync(join(rootfs, "home/hutch"), { recursive: true });
    writeFileSync(join(rootfs, "etc/apt/sources.list"), `${mark}\n`);
    writeFileSync(join(rootfs, "usr/bin/su"), "#!/bin/sh\n");
    chmodSync(join(rootfs, "usr/bin/su"), 0o4755);
    symlinkSync("su", join(rootfs, "usr/bin/su-link"));
    if (root) chownSync(join(rootfs, "home/hutch"), 1000, 1000);
    return { ...UPGRADE, upgraded: [...UPGRADE.upgraded, mark] };
  };
  return { make, calls };
}

describe("image build: the upgraded tree kept between builds", () => {
  test("a second build with the same start copies the kept tree, owners and modes as they were; --no-cache makes it again", async () => {
    const images = scratchDir("hutch-trees-");
    const notes: string[] = [];
    const first = join(images, "one");
    const a = maker(first, "first");
    const one = await withBaseTree(images, KEY, first, false, a.make, (t) => notes.push(t));
    expect(one.reused).toBe(false);
    expect(a.calls.n).toBe(1);
    expect(readdirSync(join(images, TREES))).toEqual([treeHash(KEY).slice(0, 16)]);

    const second = join(images, "two");
    const b = maker(second, "second");
    const two = await withBaseTree(images, KEY, second, false, b.make, (t) => notes.push(t));
    expect(two.reused).toBe(true);
    expect(b.calls.n).toBe(0);
    expect(two.upgrade).toEqual(one.upgrade);
    expect(readFileSync(join(second, "etc/apt/sources.list"), "utf8")).toBe("first\n");
    expect(statSync(join(second, "usr/bin/su")).mode & 0o7777).toBe(0o4755);
    expect(readdirSync(join(second, "usr/bin")).sort()).toEqual(["su", "su-link"]);
    if (root) expect(statSync(join(second, "home/hutch")).uid).toBe(1000);

    const third = join(images, "three");
    const c = maker(third, "third");
    const forced = await withBaseTree(images, KEY, third, true, c.make, (t) => notes.push(t));
    expect(forced.reused).toBe(false);
    expect(c.calls.n).toBe(1);
    // What --no-cache made is the one kept now.
    const fourth = join(images, "four");
    await withBaseTree(images, KEY, fourth, false, maker(fourth, "fourth").make, (t) => notes.push(t));
    expect(readFileSync(join(fourth, "etc/apt/sources.list"), "utf8")).toBe("third\n");
    expect(notes).toEqual([]);
  });

  test("newer updates make a new tree, and only the newest is kept", async () => {
    const images = scratchDir("hutch-trees-");
    const note = () => {};
    await withBaseTree(images, KEY, join(images, "one"), false, maker(join(images, "one"), "old").make, note);
    const newer: TreeKey = { ...KEY, updates: [KEY.updates[0]!, "bookworm-updates Fri, 04 Dec 2026 20:00:00 UTC"] };
    expect(treeHash(newer)).not.toBe(treeHash(KEY));
    // Package order does not change what debootstrap installs.
    expect(treeHash({ ...KEY, packages: ["curl", "git"] })).toBe(treeHash(KEY));
    const m = maker(join(images, "two"), "new");
    const got = await withBaseTree(images, newer, join(images, "two"), false, m.make, note);
    expect(got.reused).toBe(false);
    expect(m.calls.n).toBe(1);
    expect(readdirSync(join(images, TREES))).toEqual([treeHash(newer).slice(0, 16)]);
  });

  test("a kept tree with a broken record is made again, not copied", async () => {
    const images = scratchDir("hutch-trees-");
    const note = () => {};
    await withBaseTree(images, KEY, join(images, "one"), false, maker(join(images, "one"), "one").make, note);
    writeFileSync(join(images, TREES, treeHash(KEY).slice(0, 16), "upgrade.json"), "{not json");
    const m = maker(join(images, "two"), "two");
    const got = await withBaseTree(images, KEY, join(images, "two"), false, m.make, note);
    expect(got.reused).toBe(false);
    expect(m.calls.n).toBe(1);
    expect(got.upgrade.upgraded).toContain("two");
  });

  test("a tree that cannot be kept is said, and the build goes on with what it made", async () => {
    const images = scratchDir("hutch-trees-");
    writeFileSync(join(images, TREES), "a file where the directory goes");
    const notes: string[] = [];
    const m = maker(join(images, "one"), "one");
    const got = await withBaseTree(images, KEY, join(images, "one"), false, m.make, (t) => notes.push(t));
    expect(got.reused).toBe(false);
    expect(readFileSync(join(images, "one", "etc/apt/sources.list"), "utf8")).toBe("one\n");
    expect(notes).toHaveLength(1);
    expect(notes[0]).toContain("was not kept for the next build");
  });

  test("a kept tree that goes while a build copies it: that build makes its own, and goes on", async () => {
    const images = scratchDir("hutch-trees-");
    await withBaseTree(images, KEY, join(images, "one"), false, maker(join(images, "one"), "one").make, () => {});
    const notes: string[] = [];
    const two = join(images, "two");
    const m = maker(two, "two");
    // The copy dies part-way, as `cp -a` does when another build or an `image rm` removes the tree under it.
    let copies = 0;
    const dying = async (from: string, to: string) => {
      copies++;
      if (copies === 1) {
        mkdirSync(join(to, "etc"), { recursive: true });
        writeFileSync(join(to, "etc/half"), "");
        rmSync(join(from, ".."), { recursive: true });
        throw new Error(`cp: cannot stat '${from}/etc': No such file or directory`);
      }
      Bun.spawnSync(["cp", "-a", from, to]);
    };
    const got = await withBaseTree(images, KEY, two, false, m.make, (t) => notes.push(t), dying);
    expect(got.reused).toBe(false);
    expect(m.calls.n).toBe(1);
    expect(existsSync(join(two, "etc/half"))).toBe(false);
    expect(readFileSync(join(two, "etc/apt/sources.list"), "utf8")).toBe("two\n");
    expect(notes).toEqual([expect.stringContaining("the kept tree could not be copied (cp: cannot stat")]);
    // What it made is kept for the next build.
    expect(readFileSync(join(images, TREES, treeHash(KEY).slice(0, 16), "root/etc/apt/sources.list"), "utf8")).toBe("two\n");
  });

  test("a tree of the same start that another build kept meanwhile stays in place (a build may be copying it)", async () => {
    const images = scratchDir("hutch-trees-");
    const entry = join(images, TREES, treeHash(KEY).slice(0, 16));
    const one = join(images, "one");
    const a = maker(one, "one");
    // While this build runs debootstrap, a build of another name keeps the same tree.
    const make = async () => {
      await withBaseTree(images, KEY, join(images, "other"), false, maker(join(images, "other"), "other").make, () => {});
      return a.make();
    };
    const notes: string[] = [];
    const got = await withBaseTree(images, KEY, one, false, make, (t) => notes.push(t));
    expect(got.reused).toBe(false);
    expect(readFileSync(join(one, "etc/apt/sources.list"), "utf8")).toBe("one\n");
    expect(readFileSync(join(entry, "root/etc/apt/sources.list"), "utf8")).toBe("other\n");
    expect(readdirSync(join(images, TREES))).toEqual([treeHash(KEY).slice(0, 16)]);
    expect(notes).toEqual([]);
  });

  test("the kept tree goes when the home's last image does", async () => {
    const home = scratchDir("hutch-trees-home-");
    const images = join(home, "images");
    mkdirSync(images);
    await withBaseTree(images, KEY, join(home, "rootfs"), false, maker(join(home, "rootfs"), "one").make, () => {});
    mkdirSync(join(images, "default"));
    collectBuilds(home, () => []);
    expect(existsSync(join(images, TREES, treeHash(KEY).slice(0, 16)))).toBe(true);
    // `hutch image rm default` removes the name, then collects.
    rmSync(join(images, "default"), { recursive: true });
    collectBuilds(home, () => []);
    expect(readdirSync(join(images, TREES))).toEqual([]);
  });
});
