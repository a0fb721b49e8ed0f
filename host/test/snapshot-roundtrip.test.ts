// The snapshot store end to end on real files: round trip, dedup, the
// unchanged-file fast path, encryption at rest, progress, browse and diff.
import { afterAll, describe, expect, test } from "bun:test";
import {
  appendFileSync,
  chmodSync,
  closeSync,
  cpSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { packTar } from "@hutch/shared/node";
import { setTimes, writeXattr } from "../src/snapshot/fsx.ts";
import { snapshotStreams } from "../src/snapshot/stream-save.ts";
import {
  browse,
  diffSnapshots,
  listSnapshots,
  openStore,
  restoreTree,
  snapshotTree,
  type Progress,
  type Store,
} from "../src/snapshot/index.ts";
import {
  bytes,
  bytesUnder,
  cleanupTemps,
  describeTree,
  filesUnder,
  newStore,
  smallFiles,
  tempDir,
  text,
  treeDiff,
} from "./snapshot-helpers.ts";

// The round trip leaves a 20k-file, 500 MB tree and its store: removing them outlasts the default hook timeout on a busy machine.
afterAll(cleanupTemps, 120_000);

const MiB = 1024 * 1024;

/** Everything a workspace can hold that the store must give back exactly. */
function oddities(root: string): void {
  const names = ["with space", "ünïcødé ✓", "new\nline", "tab\there", "-dash", "#hash", `${"n".repeat(250)}.txt`];
  mkdirSync(join(root, "names"));
  names.forEach((n, i) => {
    writeFileSync(join(root, "names", n), text(100 + i, 900 + i));
  });
  mkdirSync(join(root, "empty", "nested", "deeper"), { recursive: true });
  mkdirSync(join(root, "links"));
  writeFileSync(join(root, "links", "target.txt"), "target\n");
  symlinkSync("target.txt", join(root, "links", "rel"));
  symlinkSync("../names/with space", join(root, "links", "up"));
  symlinkSync("missing", join(root, "links", "dangling"));
  symlinkSync("/etc/passwd", join(root, "links", "absolute"));
  writeFileSync(join(root, "links", "hard-a"), "one inode, three names\n");
  mkdirSync(join(root, "links", "sub"));
  linkSync(join(root, "links", "hard-a"), join(root, "links", "hard-b"));
  linkSync(join(root, "links", "hard-a"), join(root, "links", "sub", "hard-c"));
  mkdirSync(join(root, "modes"));
  for (const [name, mode] of [
    ["private", 0o600],
    ["exec", 0o755],
    ["setuid", 0o4755],
    ["setgid", 0o2750],
    ["none", 0o000],
  ] as const) {
    writeFileSync(join(root, "modes", name), name);
    chmodSync(join(root, "modes", name), mode);
  }
  mkdirSync(join(root, "modes", "sticky"));
  chmodSync(join(root, "modes", "sticky"), 0o1777);
  mkdirSync(join(root, "modes", "readonly"));
  writeFileSync(join(root, "modes", "readonly", "inside"), "x");
  chmodSync(join(root, "modes", "readonly"), 0o555);
  writeFileSync(join(root, "xattr.txt"), "has attributes");
  expect(writeXattr(join(root, "xattr.txt"), "user.hutch.test", new TextEncoder().encode("value\0with nul"))).toBe(true);
  expect(writeXattr(join(root, "empty"), "user.dir", new Uint8Array([1, 2, 3]))).toBe(true);
  // Times to the nanosecond, an old one and one before 1970; directories last, as writes above moved theirs.
  setTimes(join(root, "names", "with space"), 1_700_000_000_123_456_789n);
  setTimes(join(root, "links", "rel"), 1_600_000_000_000_000_001n);
  setTimes(join(root, "modes", "exec"), 315_532_800_000_000_007n);
  setTimes(join(root, "modes", "private"), -5_000_000_001n);
  for (const d of ["empty/nested/deeper", "empty/nested", "empty", "links/sub", "links", "names"])
    setTimes(join(root, d), 1_650_000_000_987_654_321n);
}

describe("round trip", () => {
  test(
    "20k small files, a 500 MB binary, links, empty dirs, odd names, modes, xattrs and ns mtimes come back identical",
    async () => {
      const src = join(tempDir(), "tree");
      mkdirSync(src);
      smallFiles(src, 200, 100);
      // 500 MB: 400 MiB that does not compress, then 100 MiB that does (half its bits are fixed).
      const fd = openSync(join(src, "disk.img"), "w");
      for (let i = 0; i < 500; i++) {
        const b = bytes(MiB, 77 + i);
        if (i >= 400) for (let j = 0; j < b.length; j++) b[j] = (b[j]! & 0x0f) | 0x40;
        writeSync(fd, b);
      }
      closeSync(fd);
      oddities(src);
      setTimes(src, 1_690_000_000_000_000_042n);
      const before = describeTree(src);
      expect(before.get("disk.img")!.size).toBe(500 * MiB);

      const { store } = await newStore();
      const snap = await snapshotTree(store, src);
      expect(snap.skipped).toEqual([]);
      expect(snap.stats.files).toBe(20_000 + 1 + 7 + 1 + 2 + 1 + 5 + 1 + 1);
      expect(snap.stats.symlinks).toBe(4);

      const dest = join(tempDir(), "restored");
      const r = await restoreTree(store, snap.id, dest, { symlinks: "any" });
      expect(r.hardlinks).toBe(2);
      expect(treeDiff(before, describeTree(dest))).toEqual([]);
      // Each copy goes once compared: three 500 MB trees make the suite's cleanup outlast its hook timeout.
      rmSync(dest, { recursive: true, force: true });

      // The running-box path: the guest's packTar with snapshot metadata, parsed as untrusted input.
      // Everything but xattrs (a tar of a box does not carry them) comes back the same.
      const streamed = await snapshotStreams(store, [{ name: "tree", tar: packTar(src, { meta: true }) }], { parent: null });
      expect(streamed.stats.files).toBe(snap.stats.files);
      expect(streamed.stats.blobsNew).toBe(0);
      const dest2 = join(tempDir(), "restored-stream");
      const r2 = await restoreTree(store, streamed.id, dest2, { symlinks: "any" });
      expect(r2.hardlinks).toBe(2);
      const noXattrs = (m: ReturnType<typeof describeTree>) => new Map([...m].map(([p, n]) => [p, { ...n, xattrs: undefined }]));
      expect(treeDiff(noXattrs(before), noXattrs(describeTree(join(dest2, "tree"))))).toEqual([]);
      rmSync(dest2, { recursive: true, force: true });
      store.close();
    },
    { timeout: 300_000 },
  );
});

describe("chunk sizes", () => {
  test("a store whose largest chunk is bigger than the save's read buffer saves and restores long runs without a cut", async () => {
    // 40 MiB of zeros has no content-defined cut: every chunk is the largest, 16 MiB, four times the default read buffer.
    const src = join(tempDir(), "zeros");
    mkdirSync(src);
    const big = new Uint8Array(40 * MiB);
    big.set(bytes(MiB, 9), 39 * MiB);
    writeFileSync(join(src, "zeros.img"), big);
    const { store } = await newStore({ chunker: { minSize: 1 * MiB, avgSize: 8 * MiB, maxSize: 16 * MiB } });
    const snap = await snapshotTree(store, src);
    expect(snap.stats.blobsNew).toBeGreaterThanOrEqual(2);
    const dest = join(tempDir(), "zeros-restored");
    await restoreTree(store, snap.id, dest);
    expect(Buffer.compare(readFileSync(join(dest, "zeros.img")), big)).toBe(0);
    store.close();
  }, 60_000);
});

describe("dedup and the fast path", () => {
  async function workspace(): Promise<{ src: string; store: Store }> {
    const src = join(tempDir(), "ws");
    mkdirSync(src);
    smallFiles(src, 40, 50, 3);
    writeFileSync(join(src, "big.bin"), bytes(6 * MiB, 5));
    const { store } = await newStore();
    return { src, store };
  }

  test("a no-change snapshot reads no file and stores nothing but the snapshot", async () => {
    const { src, store } = await workspace();
    const first = await snapshotTree(store, src);
    expect(first.stats.filesRead).toBe(2001);
    const second = await snapshotTree(store, src);
    expect(second.stats.filesRead).toBe(0);
    expect(second.stats.blobsNew).toBe(0);
    expect(second.stats.treesNew).toBe(0);
    expect(second.stats.bytesStored).toBe(0);
    expect((await listSnapshots(store)).map((s) => s.parent)).toEqual([undefined, first.id]);
    store.close();
  });

  test("a file touched without a change is read again but stores nothing", async () => {
    const { src, store } = await workspace();
    await snapshotTree(store, src);
    const f = join(src, "d0", "m0", "f0.ts");
    writeFileSync(f, readFileSync(f));
    const again = await snapshotTree(store, src);
    expect(again.stats.filesRead).toBe(1);
    expect(again.stats.blobsNew).toBe(0);
    store.close();
  });

  test("changing one 1 KB file stores under 64 KB of new data", async () => {
    const { src, store } = await workspace();
    const dir = store.backend.location;
    const f = join(src, "d2", "m3", "one-kb.ts");
    writeFileSync(f, text(1024, 4242));
    await snapshotTree(store, src);
    const before = bytesUnder(dir);
    writeFileSync(f, text(1024, 4243));
    const changed = await snapshotTree(store, src);
    const grown = bytesUnder(dir) - before;
    expect(changed.stats.filesRead).toBe(1);
    expect(changed.stats.blobsNew).toBe(1);
    expect(grown).toBeGreaterThan(0);
    expect(grown).toBeLessThan(64 * 1024);
    store.close();
  });

  test("a snapshot of a copy of the tree shares every chunk", async () => {
    const { src, store } = await workspace();
    const a = await snapshotTree(store, src);
    const copy = join(tempDir(), "copy");
    cpSync(src, copy, { recursive: true, preserveTimestamps: true });
    const b = await snapshotTree(store, copy);
    expect(b.stats.filesRead).toBe(2001);
    expect(b.stats.blobsNew).toBe(0);
    const chunksOf = async (id: string) => {
      const out = new Set<string>();
      const walk = async (treeId: string) => {
        for (const e of await store.readTree(treeId, id)) {
          if (e.type === "dir") await walk(e.tree!);
          else for (const c of e.content ?? []) out.add(c);
        }
      };
      await walk((await store.getSnapshot(id)).tree);
      return out;
    };
    const [ca, cb] = [await chunksOf(a.id), await chunksOf(b.id)];
    // 2,000 small files and big.bin, whose cut points depend on this store's chunker key.
    const bigChunks = store.chunker.lengths(bytes(6 * MiB, 5)).length;
    expect(ca.size).toBe(2000 + bigChunks);
    expect([...cb].filter((c) => !ca.has(c))).toEqual([]);
    expect(cb.size).toBe(ca.size);
    store.close();
  });
});

describe("encryption at rest", () => {
  test("a known string from a workspace file is not in the store's bytes, and is in the restored file", async () => {
    const secret = "hutch-known-plaintext-8d2f1a6c";
    const fileName = "unusual-file-name-5b7e.txt";
    const src = join(tempDir(), "ws");
    mkdirSync(src);
    smallFiles(src, 3, 10);
    writeFileSync(join(src, fileName), `${text(5000, 1)}\n${secret}\n${text(3000, 2)}`);
    // The same string in a large, compressible file too (a chunk bigger than the inline path).
    writeFileSync(join(src, "big.log"), `${secret}\n`.repeat(200_000));
    const { store, loc } = await newStore();
    const snap = await snapshotTree(store, src);
    store.close();
    const raw = [...filesUnder(loc.dir!), ...filesUnder(loc.cacheDir), ...filesUnder(loc.keysDir)];
    expect(raw.length).toBeGreaterThan(5);
    for (const needle of [secret, fileName]) {
      const hits = raw.filter((f) => readFileSync(f).includes(needle));
      expect(hits).toEqual([]);
    }
    const reopened = await openStore(loc);
    const dest = join(tempDir(), "out");
    await restoreTree(reopened, snap.id, dest);
    const restored = filesUnder(dest).filter((f) => readFileSync(f).includes(secret));
    expect(restored.map((f) => f.slice(dest.length + 1)).sort()).toEqual(["big.log", fileName]);
    reopened.close();
  });

  test("the key never enters the store, and key files are private", async () => {
    const { store, loc } = await newStore();
    const keyFile = filesUnder(loc.keysDir).find((f) => f.includes("snapshot-"))!;
    const sealed = readFileSync(keyFile);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(statSync(loc.keysDir).mode & 0o777).toBe(0o700);
    expect(store.keys.enc.length).toBe(32);
    for (const f of filesUnder(loc.dir!)) {
      const b = readFileSync(f);
      expect(b.includes(Buffer.from(sealed.subarray(20, 52)))).toBe(false);
      expect(b.includes(Buffer.from(store.keys.enc))).toBe(false);
    }
    store.close();
  });

  test("another home's keys do not open the store, and say so", async () => {
    const { store, loc } = await newStore();
    store.close();
    const other = tempDir();
    expect(openStore({ ...loc, keysDir: join(other, "keys") })).rejects.toThrow(/no key for snapshot store/);
  });
});

describe("progress", () => {
  test("reports files, bytes, rate and an ETA while saving and restoring, and ends done", async () => {
    const src = join(tempDir(), "ws");
    mkdirSync(src);
    smallFiles(src, 20, 50);
    writeFileSync(join(src, "big.bin"), bytes(40 * MiB, 9));
    const { store } = await newStore();
    const seen: Progress[] = [];
    await snapshotTree(store, src, { progress: (p) => seen.push(p) });
    const last = seen[seen.length - 1]!;
    expect(last).toMatchObject({ op: "snapshot", done: true, files: 1001, bytes: last.bytesTotal!, filesTotal: 1001 });
    expect(last.bytesNew).toBeGreaterThan(0);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.bytes).toBeGreaterThanOrEqual(seen[i - 1]!.bytes);
    expect(JSON.parse(JSON.stringify(last))).toEqual(last);

    const restoring: Progress[] = [];
    const snaps = await listSnapshots(store);
    await restoreTree(store, snaps[0]!.id, join(tempDir(), "out"), { progress: (p) => restoring.push(p) });
    expect(restoring[restoring.length - 1]).toMatchObject({ op: "restore", done: true, files: 1001, filesTotal: 1001 });
    const mid = restoring.filter((p) => !p.done);
    if (mid.length > 0) expect(mid.every((p) => p.etaMs !== undefined && p.rate >= 0)).toBe(true);
    store.close();
  });
});

describe("browse, diff and partial restore", () => {
  test("browse lists a directory, diff names what changed, paths restore a part", async () => {
    const src = join(tempDir(), "ws");
    mkdirSync(join(src, "src"), { recursive: true });
    writeFileSync(join(src, "src", "a.ts"), "a");
    writeFileSync(join(src, "src", "b.ts"), "b");
    writeFileSync(join(src, "README"), "r");
    const { store } = await newStore();
    const one = await snapshotTree(store, src);
    appendFileSync(join(src, "src", "a.ts"), "more");
    writeFileSync(join(src, "src", "c.ts"), "c");
    chmodSync(join(src, "README"), 0o600);
    const two = await snapshotTree(store, src);

    const listing = await browse(store, two.id, "src");
    expect(listing.entries.map((e) => [e.name, e.type, e.size])).toEqual([
      ["a.ts", "file", 5],
      ["b.ts", "file", 1],
      ["c.ts", "file", 1],
    ]);
    expect((await browse(store, two.id, "src/a.ts")).entries.map((e) => e.name)).toEqual(["a.ts"]);
    expect(browse(store, two.id, "nope")).rejects.toThrow("not in snapshot");

    const changes = [];
    for await (const c of diffSnapshots(store, one.id, two.id)) changes.push(c);
    expect(changes).toEqual([
      { path: "README", change: "metadata", type: "file" },
      { path: "src", change: "metadata", type: "dir" },
      { path: "src/a.ts", change: "modified", type: "file" },
      { path: "src/c.ts", change: "added", type: "file" },
    ]);

    const dest = join(tempDir(), "part");
    await restoreTree(store, two.id, dest, { paths: ["src/c.ts"] });
    expect(filesUnder(dest).map((f) => f.slice(dest.length + 1))).toEqual(["src/c.ts"]);
    store.close();
  });
});
