// The seal worker (host/src/snapshot/seal-thread.ts): a large save hands its
// new blobs to a second thread through a shared ring; what it stores must be
// exactly what sealing on the saving thread stores, a blob too big for the
// ring crosses on its own, and a worker that fails fails the save cleanly.
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { check, restoreTree, snapshotTree } from "../src/snapshot/index.ts";
import { SealThread } from "../src/snapshot/seal-thread.ts";
import { BlobWriter, THREAD_AFTER_BYTES } from "../src/snapshot/writer.ts";
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
    const t = new SealThread({ enc: new Uint8Array(32), stagingDir: notADir, packBytes: 64 * 1024 }, (stored) => sealed.push(stored));
    while (!t.ready) await Bun.sleep(5);
    const id = new Uint8Array(32);
    const failed = (async () => {
      for (let i = 0; i < 1000; i++) await t.send("data", id, bytes(64 * 1024, i));
      await t.flush();
    })().then(
      () => null,
      (e: Error) => e,
    );
    expect((await failed)?.message).toMatch(/^sealing failed: ENOTDIR/);
    expect(sealed).toEqual([]);
    await expect(t.send("data", id, bytes(10, 1))).rejects.toThrow(/sealing failed/);
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
    // The save yields whenever the worker has sealed a batch, so this runs mid-save. Each 1 MiB file fills a pack of
    // its own: past the first THREAD_AFTER_BYTES (sealed on the saving thread) the packs are the worker's, and a file
    // where the staging directory was stops its next one (even for root).
    const watch = setInterval(() => {
      if (broken || packs() < THREAD_AFTER_BYTES / MiB + 4) return;
      broken = true;
      renameSync(staging, `${staging}.away`);
      writeFileSync(staging, "");
    }, 1);
    const err = await snapshotTree(store, root).then(
      () => null,
      (e: Error) => e,
    );
    clearInterval(watch);
    expect(broken).toBe(true);
    expect(err?.message).toMatch(/ENOTDIR|not a directory/);
    rmSync(staging);
    renameSync(`${staging}.away`, staging);
    expect(await store.listSnapshots()).toHaveLength(0);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    const again = await snapshotTree(store, root);
    const out = join(tempDir(), "out");
    await restoreTree(store, again.id, out);
    expect(describeTree(out)).toEqual(describeTree(root));
    store.close();
  }, 120_000);
});
