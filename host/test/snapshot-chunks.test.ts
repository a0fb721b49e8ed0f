// A running box's snapshot through the real guest's snap.out: the guest walks
// and chunks, the host offers the box's own have-map and stores what is
// sent. Round trip with xattrs and hard links; a second save sends only the
// changed file's chunks; another box is offered nothing; a guest without
// the tool is read by tar; and crafted records that lie are refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, linkSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Chan, DIGEST_BYTES, dataRecord, entryRecord, haveRecord, type SnapEntry } from "@hutch/shared";
import { packTar } from "@hutch/shared/node";
import { collect, connect, type Guest, type Host, startGuest } from "../../guest/test/harness.ts";
import { readXattrs, setTimes, writeXattr } from "../src/snapshot/fsx.ts";
import { guestRoots } from "../src/snapshot/guest-roots.ts";
import { boxDigestKey, digestOf, HaveMap } from "../src/snapshot/have.ts";
import { listSnapshots, restoreTree, type Store } from "../src/snapshot/index.ts";
import { snapshotStreams } from "../src/snapshot/stream-save.ts";
import { bytes, cleanupTemps, describeTree, newStore, tempDir, text, treeDiff } from "./snapshot-helpers.ts";

let guest: Guest;
let host: Host;
let capabilities: string[];

beforeAll(async () => {
  guest = await startGuest();
  host = await connect(guest.socket);
  capabilities = ((await host.hello) as { capabilities: string[] }).capabilities;
});
afterAll(async () => {
  host?.close();
  await guest?.stop();
  cleanupTemps();
});

const MiB = 1024 * 1024;

function fillWorkspace(ws: string): boolean {
  mkdirSync(join(ws, "src", "deep"), { recursive: true });
  mkdirSync(join(ws, "empty"));
  for (let i = 0; i < 30; i++) writeFileSync(join(ws, "src", `f${i}.ts`), text(500 + i * 37, i));
  writeFileSync(join(ws, "src", "deep", "with space ✓"), "odd\n");
  writeFileSync(join(ws, "new\nline"), "nl");
  writeFileSync(join(ws, "big.bin"), bytes(5 * MiB, 7));
  // The same 5 MiB again: the second copy's chunks are named within the save, not sent twice.
  writeFileSync(join(ws, "copy.bin"), bytes(5 * MiB, 7));
  writeFileSync(join(ws, "empty.txt"), "");
  linkSync(join(ws, "src", "f1.ts"), join(ws, "hard"));
  symlinkSync("src/f2.ts", join(ws, "sym"));
  symlinkSync("/etc/passwd", join(ws, "outside"));
  const x = writeXattr(join(ws, "src", "f3.ts"), "user.origin", new TextEncoder().encode("from the box"));
  writeXattr(join(ws, "empty"), "user.kind", new Uint8Array([0, 1, 2]));
  for (const p of ["src/f0.ts", "big.bin", "empty"]) setTimes(join(ws, p), 981173106123456789n);
  return x;
}

async function save(store: Store, boxId: string, haveFile: string, caps = capabilities) {
  const g = await guestRoots({
    mux: host.mux,
    capabilities: caps,
    store,
    boxId,
    haveFile,
    roots: [
      { name: "workspace", path: guest.workspace, exclude: [] },
      { name: "home", path: guest.home, exclude: [] },
    ],
  });
  try {
    return await snapshotStreams(store, g.roots, { source: `box:${boxId}`, ...(g.have ? { have: g.have } : {}) });
  } finally {
    g.close();
  }
}

describe("snap.out through the real guest", () => {
  let store: Store;
  let haveFile: string;
  let xattrs = false;

  beforeAll(async () => {
    xattrs = fillWorkspace(guest.workspace);
    writeFileSync(join(guest.home, ".note"), "home\n");
    ({ store } = await newStore());
    haveFile = join(tempDir(), "cache", "have", "box_a");
  });

  test("the guest offers the tool", () => {
    expect(capabilities).toContain("chunks");
  });

  test("a first save sends every chunk once, and restores identical (xattrs, hard links, ns mtimes)", async () => {
    const r = await save(store, "box_a", haveFile);
    // 5 MiB cut near 1 MiB: several chunks; the copy's are named, not sent again.
    expect(r.transfer.chunksNamed).toBeGreaterThanOrEqual(4);
    expect(r.transfer.bytesNamed).toBe(5 * MiB);
    // Every file's bytes once (the home holds the guest's own files too), plus entries and record heads.
    expect(r.transfer.bytes).toBeGreaterThan(r.stats.bytes - r.transfer.bytesNamed);
    expect(r.transfer.bytes).toBeLessThan(r.stats.bytes - r.transfer.bytesNamed + 64 * 1024);
    expect(r.stats).toMatchObject({ symlinks: 2 });
    // The map is the host's, private.
    expect(statSync(haveFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(haveFile, "..")).mode & 0o777).toBe(0o700);

    const dest = join(tempDir(), "out");
    await restoreTree(store, r.id, dest, { symlinks: "any" });
    expect(treeDiff(describeTree(guest.workspace), describeTree(join(dest, "workspace")))).toEqual([]);
    expect(xattrs).toBe(true);
    expect(describeTree(join(dest, "workspace")).get("src/f3.ts")?.xattrs).toContain("user.origin");
  });

  test("restored into the box by tar.in: same bytes, modes, hard links, ns mtimes and user.* xattrs", async () => {
    const [snap] = (await listSnapshots(store)).slice(-1);
    const staging = join(tempDir(), "staging");
    await restoreTree(store, snap!.id, staging, { symlinks: "any", xattrs: (n) => n.startsWith("user.") });
    const stream = host.mux.open({ tool: "tar.in", path: join(guest.home, "Restored"), name: "ws", links: true });
    const done = collect(stream);
    for await (const piece of packTar(join(staging, "workspace"), { meta: true, xattrs: readXattrs }))
      await stream.write(Chan.stdin, piece);
    stream.eof(Chan.stdin);
    expect(await done.closed).toBeUndefined();
    const diff = treeDiff(describeTree(guest.workspace), describeTree(join(guest.home, "Restored", "ws")));
    expect(diff).toEqual([]);
    rmSync(join(guest.home, "Restored"), { recursive: true });
  });

  test("a second save after a one-file change sends only that file's chunk", async () => {
    writeFileSync(join(guest.workspace, "src", "f5.ts"), text(700, 555));
    const r = await save(store, "box_a", haveFile);
    expect(r.transfer.chunksSent).toBe(1);
    expect(r.stats.filesChanged).toBe(1);
    // Digests and entries, not the 10 MiB of files.
    expect(r.transfer.bytes).toBeLessThan(64 * 1024);
    expect(r.transfer.bytesNamed).toBeGreaterThan(10 * MiB);
  });

  test("another box sharing the store is offered nothing: its first save sends everything", async () => {
    const other = join(tempDir(), "cache", "have", "box_b");
    const r = await save(store, "box_b", other);
    expect(r.transfer.chunksNamed).toBeGreaterThanOrEqual(4); // only its own copy.bin, named within the save
    expect(r.transfer.bytes).toBeGreaterThan(5 * MiB);
    // Nothing new reached the store: the chunks were there, the box just could not know.
    expect(r.stats.bytesStored).toBeLessThan(64 * 1024);
  });

  test("a guest without snap.out is read by tar", async () => {
    const r = await save(store, "box_a", join(tempDir(), "unused"), ["tar"]);
    expect(r.transfer.chunksNamed).toBe(0);
    expect(r.transfer.bytes).toBeGreaterThan(10 * MiB);
    expect(r.stats.filesChanged).toBe(0);
    // The tar carries the same metadata, xattrs too.
    const dest = join(tempDir(), "out");
    await restoreTree(store, r.id, dest, { symlinks: "any" });
    expect(treeDiff(describeTree(guest.workspace), describeTree(join(dest, "workspace")))).toEqual([]);
  });
});

describe("records that lie are refused, and leave no snapshot", () => {
  const root: SnapEntry = { path: [], type: "dir", mode: 0o755, mtime: "0", uid: 0, gid: 0 };
  const file = (name: string, size: number): SnapEntry => ({ path: [name], type: "file", mode: 0o644, mtime: "0", uid: 0, gid: 0, size });
  const cases: [string, (key: Uint8Array) => Uint8Array[], RegExp][] = [
    [
      "a named chunk it was never offered",
      () => [entryRecord(root), entryRecord(file("a", 10)), haveRecord(new Uint8Array(32), 10)],
      /not offered/,
    ],
    [
      "more bytes than the file's size",
      () => [entryRecord(root), entryRecord(file("a", 3)), ...dataRecord(new Uint8Array(4))],
      /more bytes/,
    ],
    [
      "a short chunk before the file's end",
      () => [entryRecord(root), entryRecord(file("a", 4096)), ...dataRecord(new Uint8Array(10))],
      /shorter than the store's smallest/,
    ],
    ["a file cut short", () => [entryRecord(root), entryRecord(file("a", 3)), entryRecord(file("b", 0))], /bytes short/],
    [
      "a chunk over the largest",
      () => [entryRecord(root), entryRecord(file("a", 9 * MiB)), ...dataRecord(new Uint8Array(5 * MiB))],
      /a chunk of/,
    ],
    ["an entry with an unknown field", () => [entryRecord(root), entryRecord({ ...file("a", 0), evil: 1 } as SnapEntry)], /malformed/],
    ["a name with a slash", () => [entryRecord(root), entryRecord(file("a/b", 0))], /has a name with "\/"|malformed/],
    [
      "a named chunk of the wrong length",
      (key) => {
        const bytes = new Uint8Array(100).fill(9);
        return [entryRecord(root), entryRecord(file("a", 200)), ...dataRecord(bytes), haveRecord(digestOf(key, bytes), 99)];
      },
      /wrong length/,
    ],
    ["a first entry that is a file", () => [entryRecord({ ...file("x", 0), path: [] })], /root directory/],
  ];
  // Small chunks, so a crafted file of a few hundred bytes has several.
  const chunker = { minSize: 64, avgSize: 256, maxSize: 1024 };
  for (const [what, records, message] of cases) {
    test(what, async () => {
      const { store } = await newStore({ chunker });
      const key = boxDigestKey(store.keys.id, "box_x");
      const map = HaveMap.load(join(tempDir(), "have"));
      await expect(
        snapshotStreams(store, [{ name: "workspace", records: records(key) }], { source: "box:x", have: { map, key } }),
      ).rejects.toThrow(message);
      expect(await listSnapshots(store)).toEqual([]);
      store.close();
    });
  }

  test("a chunk sent once may be named again in the same save; the map is written once the snapshot is", async () => {
    const { store } = await newStore({ chunker });
    const key = boxDigestKey(store.keys.id, "box_y");
    const file0 = join(tempDir(), "have");
    const map = HaveMap.load(file0);
    const bytes = new Uint8Array(100).fill(3);
    const r = await snapshotStreams(
      store,
      [
        {
          name: "workspace",
          records: [entryRecord(root), entryRecord(file("a", 200)), ...dataRecord(bytes), haveRecord(digestOf(key, bytes), 100)],
        },
      ],
      { source: "box:y", have: { map, key } },
    );
    expect(r.transfer).toMatchObject({ chunksSent: 1, chunksNamed: 1, bytesNamed: 100 });
    expect(existsSync(file0)).toBe(true);
    const again = HaveMap.load(file0);
    expect(again.size).toBe(1);
    expect(again.offer(() => true).digests.length).toBe(DIGEST_BYTES);
    store.close();
  });
});
