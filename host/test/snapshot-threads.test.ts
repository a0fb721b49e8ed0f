// The second cores of a save and a restore (host/src/snapshot/ring-thread.ts):
// a large save hands its new blobs to a seal worker, a large restore its small
// files to a file writer. What either stores or writes must be what the
// calling thread alone would, and a worker that fails fails the operation
// cleanly.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, linkSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { check, restoreTree, snapshotTree } from "../src/snapshot/index.ts";
import { SealThread } from "../src/snapshot/seal-thread.ts";
import { BlobWriter, THREAD_AFTER_BYTES } from "../src/snapshot/writer.ts";
import { writeXattr } from "../src/snapshot/fsx.ts";
import { bytes, cleanupTemps, describeTree, newStore, smallFiles, tempDir } from "./snapshot-helpers.ts";

afterAll(cleanupTemps, 60_000);

const MiB = 1024 * 1024;

describe("the seal worker", () => {
  test("the same blobs sealed off the saving thread or on it: each readable, the worker used only when asked and large", async () => {
    const blobs = [
      bytes(THREAD_AFTER_BYTES + 1, 1),
      ...Array.from({ length: 300 }, (_, i) => bytes(1000 + i * 37, 100 + i)),
      bytes(3 * MiB, 2),
    ];
    for (const thread of [true, false]) {
      const { store } = await newStore();
      await store.syncIndex();
      await store.loadMarks();
      const w = new BlobWriter(store, { thread });
      const ids: Uint8Array[] = [];
      for (const b of blobs) ids.push(await w.put("data", b));
      // The same plaintext again is a dedup hit, wherever its first copy is being sealed.
      expect(await w.put("data", blobs[5]!)).toEqual(ids[5]!);
      await w.flush();
      expect(w.sealedOffThread > 0).toBe(thread);
      expect(w.stats.blobsNew).toBe(blobs.length);
      for (let i = 0; i < blobs.length; i++) expect(await store.readBlob("data", ids[i]!, `blob ${i}`)).toEqual(blobs[i]!);
      expect((await check(store, { readData: true })).errors).toEqual([]);
      store.close();
    }
  }, 120_000);

  test("a small save never starts the worker", async () => {
    const { store } = await newStore();
    await store.syncIndex();
    await store.loadMarks();
    const w = new BlobWriter(store);
    for (let i = 0; i < 100; i++) await w.put("data", bytes(THREAD_AFTER_BYTES / 200, i));
    await w.flush();
    expect(w.sealedOffThread).toBe(0);
    store.close();
  });

  test("a worker that fails is reported by the next send or flush, and a failed worker takes nothing more", async () => {
    const dir = tempDir();
    const notADir = join(dir, "file");
    writeFileSync(notADir, "");
    const sealed: number[] = [];
    const t = new SealThread({ enc: new Uint8Array(32), stagingDir: notADir, packBytes: 64 * 1024 }, ({ stored }) => sealed.push(stored));
    while (!t.ready) await Bun.sleep(5);
    const id = new Uint8Array(32);
    const failed = (async () => {
      for (let i = 0; i < 1000; i++) await t.send({ type: "data", id }, bytes(64 * 1024, i));
      await t.flush();
    })().then(
      () => null,
      (e: Error) => e,
    );
    expect((await failed)?.message).toMatch(/^the seal worker failed: ENOTDIR/);
    expect(sealed).toEqual([]);
    await expect(t.send({ type: "data", id }, bytes(10, 1))).rejects.toThrow(/seal worker failed/);
    await t.discard();
  });

  test("a large save round-trips: 1,200 small files and a file of many chunks", async () => {
    const root = tempDir();
    smallFiles(root, 30, 40);
    writeFileSync(join(root, "big.bin"), bytes(12 * MiB, 7));
    const { store } = await newStore();
    const r = await snapshotTree(store, root);
    expect(r.stats.bytesStored).toBeGreaterThan(12 * MiB);
    const out = join(tempDir(), "out");
    await restoreTree(store, r.id, out);
    expect(describeTree(out)).toEqual(describeTree(root));
    expect((await check(store, { readData: true })).errors).toEqual([]);
    store.close();
  }, 120_000);

  test("when the worker cannot make its next pack the save fails, writes no snapshot, and the store checks clean; the next save completes", async () => {
    const root = tempDir();
    for (let i = 0; i < 40; i++) writeFileSync(join(root, `f${i}.bin`), bytes(MiB, 50 + i));
    // Small packs: the worker opens a new one every blob or two.
    const { store, loc } = await newStore({ packBytes: 64 * 1024 });
    const staging = store.backend.stagingDir();
    const packs = () => readdirSync(join(loc.dir!, "packs"), { recursive: true }).filter((f) => String(f).length > 3).length;
    let broken = false;
    // The staging directory is reached through a symlink, so that one rename can turn it into a file: a pack opened
    // or renamed out of it after that fails with ENOTDIR (even for root), and none can fall in a gap between two
    // steps. The save yields whenever the worker has sealed a batch, so the watch runs mid-save. Each 1 MiB file
    // fills a pack of its own: past the first THREAD_AFTER_BYTES (sealed on the saving thread) the packs are the
    // worker's.
    renameSync(staging, `${staging}.real`);
    symlinkSync(`${staging}.real`, staging);
    writeFileSync(`${staging}.file`, "");
    symlinkSync(`${staging}.file`, `${staging}.broken`);
    const watch = setInterval(() => {
      if (broken || packs() < THREAD_AFTER_BYTES / MiB + 4) return;
      broken = true;
      renameSync(`${staging}.broken`, staging);
    }, 1);
    const err = await snapshotTree(store, root).then(
      () => null,
      (e: Error) => e,
    );
    clearInterval(watch);
    expect(broken).toBe(true);
    expect(err?.message).toMatch(/ENOTDIR|not a directory/);
    rmSync(staging);
    rmSync(`${staging}.file`);
    renameSync(`${staging}.real`, staging);
    expect(await store.listSnapshots()).toHaveLength(0);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    const again = await snapshotTree(store, root);
    const out = join(tempDir(), "out");
    await restoreTree(store, again.id, out);
    expect(describeTree(out)).toEqual(describeTree(root));
    store.close();
  }, 120_000);
});

describe("the restore's file writer", () => {
  /** 1,500 small files in 50 directories; in the last directories (past the writer's start) hard links, xattrs, odd modes and an empty file. */
  function tree(): string {
    const root = tempDir();
    smallFiles(root, 50, 30);
    const late = join(root, "zz-late");
    mkdirSync(late);
    writeFileSync(join(late, "a.txt"), "linked\n");
    linkSync(join(late, "a.txt"), join(late, "b.txt"));
    linkSync(join(late, "a.txt"), join(root, "d0", "m0", "zz-link.txt"));
    writeFileSync(join(late, "empty"), "");
    writeFileSync(join(late, "setgid"), "x");
    chmodSync(join(late, "setgid"), 0o2755);
    writeFileSync(join(late, "private"), "y");
    chmodSync(join(late, "private"), 0o600);
    writeFileSync(join(late, "tagged"), "z");
    writeXattr(join(late, "tagged"), "user.hutch.test", new TextEncoder().encode("v1"));
    writeXattr(join(late, "tagged"), "user.other", new TextEncoder().encode("v2"));
    writeFileSync(join(late, "big.bin"), bytes(9 * MiB, 3));
    return root;
  }

  test("a restore of many files through the writer is identical, links, modes, xattrs and times included", async () => {
    const root = tree();
    const { store } = await newStore();
    const r = await snapshotTree(store, root);
    const out = join(tempDir(), "out");
    const res = await restoreTree(store, r.id, out);
    expect(describeTree(out)).toEqual(describeTree(root));
    expect(res.hardlinks).toBe(2);
    // A filter is applied before a file reaches the writer.
    const some = join(tempDir(), "some");
    await restoreTree(store, r.id, some, { xattrs: (n) => n === "user.hutch.test" });
    const want = describeTree(root);
    const tagged = want.get("zz-late/tagged")!;
    tagged.xattrs = JSON.stringify([["user.hutch.test", Buffer.from("v1").toString("hex")]]);
    expect(describeTree(some)).toEqual(want);
    store.close();
  }, 120_000);

  test("when the writer cannot create a file the restore fails, and nothing is left at the destination or in staging", async () => {
    const root = tempDir();
    smallFiles(root, 40, 40);
    const { store } = await newStore();
    const r = await snapshotTree(store, root);
    const parent = tempDir();
    const out = join(parent, "out");
    let broken = false;
    // The restore yields as the writer finishes batches: mid-restore, a directory not yet written to becomes a file.
    const watch = setInterval(() => {
      if (broken) return;
      const staging = readdirSync(parent).find((n) => n.startsWith(".hutch-restore-"));
      if (!staging) return;
      const d = join(parent, staging, "d3");
      if (!existsSync(join(d, "m0"))) return;
      broken = true;
      rmSync(d, { recursive: true, force: true });
      writeFileSync(d, "");
    }, 1);
    const err = await restoreTree(store, r.id, out).then(
      () => null,
      (e: Error) => e,
    );
    clearInterval(watch);
    expect(broken).toBe(true);
    expect(err?.message).toMatch(/ENOTDIR|EEXIST|ENOENT|not a directory/);
    await Bun.sleep(50);
    expect(readdirSync(parent)).toEqual([]);
    store.close();
  }, 120_000);
});
