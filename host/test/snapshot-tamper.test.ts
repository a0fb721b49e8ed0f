// A store is untrusted on read: a flipped byte anywhere, a truncated pack, a
// hostile manifest or a restore path that leaves the tree must be refused
// with the object named, leaving nothing behind.
import { afterAll, describe, expect, test } from "bun:test";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { newId } from "@hutch/shared";
import { fromHex, hex } from "../src/snapshot/crypto.ts";
import { check, openStore, restoreTree, snapshotTree, type Store, StoreError } from "../src/snapshot/index.ts";
import { type SnapshotBody, putJson } from "../src/snapshot/objects.ts";
import { BlobWriter } from "../src/snapshot/writer.ts";
import { bytes, cleanupTemps, filesUnder, location, newStore, smallFiles, tempDir, text } from "./snapshot-helpers.ts";

afterAll(cleanupTemps);

function flipByte(path: string, at: number): void {
  const fd = openSync(path, "r+");
  const b = new Uint8Array(1);
  readSync(fd, b, 0, 1, at);
  b[0] = b[0]! ^ 0x20;
  writeSync(fd, b, 0, 1, at);
  closeSync(fd);
}

function packPath(store: Store, name: string): string {
  return join(store.backend.location, "packs", name.slice(0, 2), name);
}

async function failure(p: Promise<unknown>): Promise<StoreError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof StoreError) return err;
    throw err;
  }
  throw new Error("expected a StoreError, but it succeeded");
}

/** A store with one snapshot of a small workspace; and where things are in it. */
async function fixture() {
  const src = join(tempDir(), "ws");
  mkdirSync(src);
  smallFiles(src, 5, 20);
  writeFileSync(join(src, "big.bin"), bytes(3 * 1024 * 1024, 3));
  writeFileSync(join(src, "note.txt"), text(3000, 7));
  const { store, loc } = await newStore();
  const snap = await snapshotTree(store, src);
  const root = await store.readTree((await store.getSnapshot(snap.id)).tree, "test");
  const note = root.find((e) => e.name === "note.txt")!;
  const data = store.cache.find("data", fromHex(note.content![0]!), false)!;
  const tree = store.cache.find("tree", fromHex((await store.getSnapshot(snap.id)).tree), false)!;
  const parent = tempDir();
  const dest = join(parent, "out");
  return { src, store, loc, snap, data, tree, parent, dest };
}

/** Nothing came out of a failed restore: no destination and no staging directory. */
function nothingWritten(parent: string, dest: string): void {
  expect(existsSync(dest)).toBe(false);
  expect(readdirSync(parent)).toEqual([]);
}

describe("tamper", () => {
  test("a flipped byte in a data pack: restore fails naming the pack, writes nothing, check --read-data finds it", async () => {
    const f = await fixture();
    flipByte(packPath(f.store, f.data.pack), f.data.offset + 10);
    const err = await failure(restoreTree(f.store, f.snap.id, f.dest));
    expect(err.object).toBe(`packs/${f.data.pack}`);
    expect(err.message).toContain("fails authentication");
    nothingWritten(f.parent, f.dest);
    const quick = await check(f.store);
    expect(quick.ok).toBe(true);
    const full = await check(f.store, { readData: true });
    expect(full.ok).toBe(false);
    expect(full.errors.map((e) => e.object)).toContain(`packs/${f.data.pack}`);
    expect(full.errors.some((e) => e.message.includes("does not match its name"))).toBe(true);
    f.store.close();
  });

  test("a flipped byte in a manifest (a tree blob): refused before anything is written; check finds it", async () => {
    const f = await fixture();
    flipByte(packPath(f.store, f.tree.pack), f.tree.offset + 5);
    const err = await failure(restoreTree(f.store, f.snap.id, f.dest));
    expect(err.object).toBe(`packs/${f.tree.pack}`);
    nothingWritten(f.parent, f.dest);
    const res = await check(f.store);
    expect(res.ok).toBe(false);
    expect(res.errors.map((e) => e.object)).toContain(`packs/${f.tree.pack}`);
    f.store.close();
  });

  test("a flipped byte in a snapshot object: refused naming it; check finds it", async () => {
    const f = await fixture();
    const name = filesUnder(join(f.store.backend.location, "snapshots"))[0]!;
    flipByte(name, 30);
    const object = `snapshots/${name.split("/").pop()}`;
    const err = await failure(restoreTree(f.store, f.snap.id, f.dest));
    expect(err.object).toBe(object);
    nothingWritten(f.parent, f.dest);
    const res = await check(f.store);
    expect(res.errors.map((e) => e.object)).toContain(object);
    f.store.close();
  });

  test("a flipped byte in the index: a restore that reads it fails naming it; check finds it", async () => {
    const f = await fixture();
    f.store.close();
    const file = filesUnder(join(f.loc.dir!, "index"))[0]!;
    flipByte(file, statSync(file).size - 40);
    const object = `index/${file.split("/").pop()}`;
    // A machine that has not read this index file before (no cache) must read it to restore.
    const fresh = await openStore({ ...f.loc, cacheDir: join(tempDir(), "cache") });
    const err = await failure(restoreTree(fresh, f.snap.id, f.dest));
    expect(err.object).toBe(object);
    expect(err.message).toContain("does not match its name");
    nothingWritten(f.parent, f.dest);
    const res = await check(fresh, { readData: true });
    expect(res.errors.map((e) => e.object)).toContain(object);
    fresh.close();
  });

  test("a truncated pack: restore refused naming it; check says it is short", async () => {
    const f = await fixture();
    const path = packPath(f.store, f.data.pack);
    truncateSync(path, statSync(path).size - 100);
    const err = await failure(restoreTree(f.store, f.snap.id, f.dest));
    expect(err.object).toBe(`packs/${f.data.pack}`);
    expect(err.message).toContain("truncated");
    nothingWritten(f.parent, f.dest);
    const res = await check(f.store);
    expect(res.errors.find((e) => e.object === `packs/${f.data.pack}`)?.message).toContain("the index says");
    f.store.close();
  });

  test("an untouched store passes check --read-data", async () => {
    const f = await fixture();
    const res = await check(f.store, { readData: true });
    expect(res.errors).toEqual([]);
    expect(res.ok).toBe(true);
    expect(res.packsRead).toBe(res.packs);
    f.store.close();
  });
});

/** Writes a snapshot whose root tree is `entries` exactly as given, past every check a save makes. */
async function hostileSnapshot(store: Store, entries: unknown[]): Promise<string> {
  const writer = new BlobWriter(store);
  const file = await writer.put("data", new TextEncoder().encode("payload"));
  const doc = JSON.stringify({ v: 1, entries }).replaceAll("FILE_CHUNK", hex(file));
  const tree = await writer.put("tree", new TextEncoder().encode(doc));
  await writer.flush();
  const body: SnapshotBody = {
    v: 1,
    id: newId("snap"),
    time: Date.now(),
    source: "crafted",
    host: "elsewhere",
    tree: hex(tree),
    root: { mode: 0o755, mtime: "0", uid: 0, gid: 0 },
    tags: [],
    stats: {
      files: 1,
      dirs: 0,
      symlinks: 0,
      bytes: 7,
      filesRead: 1,
      filesChanged: 1,
      bytesRead: 7,
      blobsNew: 1,
      treesNew: 1,
      bytesStored: 0,
      skipped: 0,
      ms: 0,
    },
    skipped: [],
  };
  await putJson(store.backend, store.keys.enc, "snapshots", body);
  return body.id;
}

const fileEntry = (name: string) => ({
  name,
  type: "file",
  mode: 0o644,
  mtime: "0",
  uid: 0,
  gid: 0,
  size: 7,
  content: ["FILE_CHUNK"],
  ino: "1",
  ctime: "0",
});

describe("bad input", () => {
  test.each([
    ["a .. entry", [fileEntry("..")], '".."'],
    ["an absolute name", [fileEntry("/etc/cron.d/x")], 'with "/"'],
    ["a name that climbs", [fileEntry("../../outside")], 'with "/"'],
  ])("a manifest with %s is refused and nothing is written", async (_name, entries, why) => {
    const { store } = await newStore();
    const id = await hostileSnapshot(store, entries);
    const parent = tempDir();
    const err = await failure(restoreTree(store, id, join(parent, "out")));
    expect(err.message).toContain(why);
    expect(err.object).toMatch(/^tree [0-9a-f]{16} \(snapshot snap_/);
    nothingWritten(parent, join(parent, "out"));
    expect((await check(store)).errors.length).toBe(1);
    store.close();
  });

  test("a manifest whose chunks do not add up to the file's size: refused, the staging directory removed", async () => {
    const { store } = await newStore();
    const id = await hostileSnapshot(store, [{ ...fileEntry("short"), size: 9 }]);
    const parent = tempDir();
    const err = await failure(restoreTree(store, id, join(parent, "out")));
    expect(err.message).toContain("add up to 7 bytes");
    nothingWritten(parent, join(parent, "out"));
    store.close();
  });

  test.each([
    ["an absolute target", "/etc/passwd"],
    ["a relative target above the root", "../../../etc/passwd"],
  ])("a symlink with %s is refused by default, nothing written; with symlinks: 'any' it is restored as a link", async (_name, target) => {
    const src = join(tempDir(), "ws");
    mkdirSync(join(src, "sub"), { recursive: true });
    writeFileSync(join(src, "sub", "file"), "x");
    symlinkSync(target, join(src, "sub", "escape"));
    const { store } = await newStore();
    const snap = await snapshotTree(store, src);
    const parent = tempDir();
    const err = await failure(restoreTree(store, snap.id, join(parent, "out")));
    expect(err.message).toContain("points outside the restored tree");
    expect(err.object).toBe("sub/escape");
    nothingWritten(parent, join(parent, "out"));
    await restoreTree(store, snap.id, join(parent, "out"), { symlinks: "any" });
    expect(readdirSync(join(parent, "out", "sub")).sort()).toEqual(["escape", "file"]);
    store.close();
  });

  test.each([["../x"], ["/etc"], ["a/../../b"], ["sub/../.."], ["link/inside"], ["sub/file/deeper"], ["missing"]])(
    "restore path %p is refused, nothing written",
    async (path) => {
      const src = join(tempDir(), "ws");
      mkdirSync(join(src, "sub"), { recursive: true });
      writeFileSync(join(src, "sub", "file"), "x");
      symlinkSync("sub", join(src, "link"));
      const { store } = await newStore();
      const snap = await snapshotTree(store, src);
      const parent = tempDir();
      const err = await failure(restoreTree(store, snap.id, join(parent, "out"), { paths: [path] }));
      expect(err.code).toBe("invalid");
      nothingWritten(parent, join(parent, "out"));
      store.close();
    },
  );

  test("a destination that is not empty is refused", async () => {
    const { store } = await newStore();
    const src = join(tempDir(), "ws");
    mkdirSync(src);
    writeFileSync(join(src, "a"), "a");
    const snap = await snapshotTree(store, src);
    const dest = tempDir();
    writeFileSync(join(dest, "mine"), "keep");
    expect(restoreTree(store, snap.id, dest)).rejects.toThrow("is not empty");
    expect(readdirSync(dest)).toEqual(["mine"]);
    store.close();
  });

  test("a store from another home opens only with its key, and a changed config is caught", async () => {
    const { store, loc } = await newStore();
    store.close();
    const config = join(loc.dir!, "config");
    const raw = await Bun.file(config).text();
    writeFileSync(config, raw.replace('"graceMs":86400000', '"graceMs":1'));
    expect(openStore(loc)).rejects.toThrow("does not match its key");
    expect(dirname(config)).toBe(loc.dir!);
  });

  test("a location with no store says so", async () => {
    expect(openStore(location())).rejects.toThrow("no snapshot store");
  });
});
