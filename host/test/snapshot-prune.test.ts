// Prune never blocks a save and never loses data: forced interleavings of a
// save and a prune in one process (a test clock and the pause seams), then a
// save loop and a prune loop racing in two processes.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  check,
  listSnapshots,
  prune,
  restoreTree,
  snapshotTree,
  type Store,
  type SavePoint,
  type PrunePoint,
} from "../src/snapshot/index.ts";
import { bytes, cleanupTemps, describeTree, newStore, smallFiles, tempDir, text, treeDiff } from "./snapshot-helpers.ts";

afterAll(cleanupTemps);

const GRACE = 60_000;

/** A gate a paused operation waits at until the test opens it. */
function gate<P extends string>(at: P) {
  let reached!: () => void;
  let open!: () => void;
  const arrived = new Promise<void>((r) => {
    reached = r;
  });
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return {
    pause: async (point: P) => {
      if (point !== at) return;
      reached();
      await opened;
    },
    arrived,
    open,
  };
}

async function setup() {
  let now = 1_800_000_000_000;
  const clock = { now: () => now, advance: (ms: number) => (now += ms) };
  const { store } = await newStore({ graceMs: GRACE, clock: clock.now });
  const src = join(tempDir(), "ws");
  mkdirSync(src);
  smallFiles(src, 4, 10, 11);
  writeFileSync(join(src, "big.bin"), bytes(2 * 1024 * 1024, 12));
  return { store, clock, src };
}

/** Forgets every snapshot that exists now (a policy that keeps only a tag nobody has). */
const forgetAll = { policy: { keepTags: ["nobody-has-this-tag"] } };

async function restoresAs(store: Store, id: string, expected: ReturnType<typeof describeTree>): Promise<void> {
  const dest = join(tempDir(), "out");
  await restoreTree(store, id, dest);
  const got = describeTree(dest);
  // The root's own times are those of the snapshot, the files' those of the tree: compare entries only.
  got.delete("");
  const want = new Map(expected);
  want.delete("");
  expect(treeDiff(want, got)).toEqual([]);
}

async function packCount(store: Store): Promise<number> {
  let n = 0;
  for await (const _ of store.backend.list("packs")) n++;
  return n;
}

describe("two phases", () => {
  test("a mark younger than the grace period deletes nothing; once it is older, unreferenced packs go", async () => {
    const { store, clock, src } = await setup();
    const first = await snapshotTree(store, src);
    clock.advance(1000);
    writeFileSync(join(src, "big.bin"), bytes(2 * 1024 * 1024, 13));
    const second = await snapshotTree(store, src);
    const packs = await packCount(store);
    const marked = await prune(store, { policy: { keepLast: 1 } });
    expect(marked.forgotten).toEqual([first.id]);
    expect(marked.marked.packs).toBeGreaterThan(0);
    expect(marked.deleted.packs).toBe(0);
    clock.advance(GRACE - 1 - 1000);
    expect((await prune(store)).deleted.packs).toBe(0);
    expect(await packCount(store)).toBe(packs + marked.repacked.packs);
    clock.advance(1001);
    const swept = await prune(store);
    expect(swept.deleted.packs).toBe(marked.marked.packs);
    expect(await packCount(store)).toBeLessThan(packs + marked.repacked.packs);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    await restoresAs(store, second.id, describeTree(src));
    store.close();
  });

  test("a grace shorter than the store's is refused", async () => {
    const { store } = await setup();
    expect(prune(store, { graceMs: GRACE - 1 })).rejects.toThrow("shorter than this store's");
    store.close();
  });

  test("a second prune waits for nobody but is refused while one holds the lock; saves are never refused", async () => {
    const { store, src } = await setup();
    await snapshotTree(store, src);
    const g = gate<PrunePoint>("marks-loaded");
    const running = prune(store, { pause: g.pause });
    await g.arrived;
    expect(prune(store)).rejects.toThrow("a prune or check is running");
    const saved = await snapshotTree(store, src);
    expect(saved.id).toMatch(/^snap_/);
    g.open();
    await running;
    store.close();
  });
});

describe("prune racing a save, forced interleavings", () => {
  test("a save that loaded the index before a mark reuses the marked pack: the delete phase keeps it", async () => {
    const { store, clock, src } = await setup();
    const want = describeTree(src);
    await snapshotTree(store, src);
    const g = gate<SavePoint>("index-loaded");
    // The save decides on reuse after this point, with the marks it loaded before the prune made one.
    const saving = snapshotTree(store, src, { parent: null, pause: g.pause });
    await g.arrived;
    const p1 = await prune(store, forgetAll);
    expect(p1.marked.packs).toBeGreaterThan(0);
    g.open();
    const saved = await saving;
    expect(saved.stats.blobsNew).toBe(0);
    clock.advance(GRACE);
    const p2 = await prune(store);
    expect(p2.revived).toBe(p1.marked.packs);
    expect(p2.deleted.packs).toBe(0);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    await restoresAs(store, saved.id, want);
    store.close();
  });

  test("a save that starts after a mark stores its own copies, and commits after the marked packs are gone", async () => {
    const { store, clock, src } = await setup();
    const want = describeTree(src);
    await snapshotTree(store, src);
    const p1 = await prune(store, forgetAll);
    expect(p1.marked.packs).toBeGreaterThan(0);
    clock.advance(GRACE / 2);
    const g = gate<SavePoint>("tree-stored");
    const saving = snapshotTree(store, src, { pause: g.pause });
    await g.arrived;
    // The delete phase runs while the save is between storing its blobs and committing: it cannot see the save.
    clock.advance(GRACE / 2);
    const p2 = await prune(store);
    expect(p2.deleted.packs).toBe(p1.marked.packs);
    clock.advance(GRACE / 4);
    g.open();
    const saved = await saving;
    expect(saved.stats.blobsNew).toBeGreaterThan(0);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    await restoresAs(store, saved.id, want);
    store.close();
  });

  // Two points a save can be at when a prune deletes what it reused: before its time check, and past it while writing
  // its snapshot object (slowly). Either way the save takes its snapshot back, and the next save completes whole.
  test.each([
    ["before-commit", "a save that ran longer than the grace period refuses to commit what it may have lost"],
    ["before-put", "a save whose snapshot write outlasts its time limit takes the snapshot back; nothing it names is left missing"],
  ] as const)("%s: %s", async (point) => {
    const { store, clock, src } = await setup();
    await snapshotTree(store, src);
    const g = gate<SavePoint>(point);
    const saving = snapshotTree(store, src, { parent: null, pause: g.pause });
    await g.arrived;
    await prune(store, forgetAll);
    clock.advance(GRACE);
    expect((await prune(store)).deleted.packs).toBeGreaterThan(0);
    g.open();
    expect(saving).rejects.toThrow("longer than the");
    await saving.catch(() => undefined);
    expect(await listSnapshots(store)).toEqual([]);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    const again = await snapshotTree(store, src);
    await restoresAs(store, again.id, describeTree(src));
    store.close();
  });

  test("a mark stamped before a save began but written after it loaded the marks waits for that save, not for a clock", async () => {
    const { store, clock, src } = await setup();
    const want = describeTree(src);
    await snapshotTree(store, src);
    // The prune reads its clock for the mark, then its write of the mark is slow.
    const pg = gate<PrunePoint>("mark-stamped");
    const pruning = prune(store, { ...forgetAll, pause: pg.pause });
    await pg.arrived;
    clock.advance(GRACE / 5);
    // A save starts, loads the marks (none visible yet) and reuses every blob of the soon-marked packs.
    const sg = gate<SavePoint>("before-commit");
    const saving = snapshotTree(store, src, { parent: null, pause: sg.pause });
    await sg.arrived;
    pg.open();
    const p1 = await pruning;
    expect(p1.marked.packs).toBeGreaterThan(0);
    // The mark is a grace period old; the save has run 0.8 of one, within its limit, and has not committed.
    clock.advance(GRACE - GRACE / 5);
    const p2 = await prune(store);
    expect(p2.waiting).toBe(1);
    expect(p2.deleted.packs).toBe(0);
    sg.open();
    const saved = await saving;
    expect(saved.stats.blobsNew).toBe(0);
    const p3 = await prune(store);
    expect(p3.waiting).toBe(0);
    expect(p3.revived).toBe(p1.marked.packs);
    expect(p3.deleted.packs).toBe(0);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    await restoresAs(store, saved.id, want);
    store.close();
  });

  test("a pending mark left by a dead prune is dropped, and a dead save's registration does not hold marks back", async () => {
    const { store, clock, src } = await setup();
    await snapshotTree(store, src);
    const { putJson, sealObject } = await import("../src/snapshot/objects.ts");
    const packs: string[] = [];
    for await (const p of store.backend.list("packs")) packs.push(p.name);
    await putJson(store.backend, store.keys.enc, "marks", { v: 1, time: clock.now(), packs });
    // A registration of a process that no longer exists (pid 2^22 + 1 is above Linux's pid_max).
    const reg = { v: 1, host: store.host, pid: 4194305, time: clock.now(), nonce: "dead" };
    const { name, bytes } = sealObject(store.keys.enc, "saves", new TextEncoder().encode(JSON.stringify(reg)));
    await store.backend.put("saves", name, bytes);
    const p1 = await prune(store, forgetAll);
    expect(p1.marked.packs).toBe(packs.length);
    const left: string[] = [];
    for await (const r of store.backend.list("saves")) left.push(r.name);
    expect(left).toEqual([]);
    clock.advance(GRACE);
    const p2 = await prune(store);
    expect(p2.waiting).toBe(0);
    expect(p2.deleted.packs).toBe(packs.length);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    store.close();
  });

  test("a save that commits its index while the delete phase rewrites the index keeps its index file", async () => {
    const { store, clock, src } = await setup();
    await snapshotTree(store, src);
    await prune(store, forgetAll);
    clock.advance(GRACE);
    const g = gate<PrunePoint>("before-delete");
    const pruning = prune(store, { pause: g.pause });
    await g.arrived;
    writeFileSync(join(src, "new.bin"), bytes(500_000, 77));
    const saved = await snapshotTree(store, src);
    expect(saved.stats.blobsNew).toBeGreaterThan(0);
    g.open();
    const p = await pruning;
    expect(p.indexFiles.removed).toBeGreaterThan(0);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    await restoresAs(store, saved.id, describeTree(src));
    store.close();
  });

  test("a partly unreferenced pack is repacked: its live blobs move, the old pack goes after the grace period", async () => {
    const { store, clock, src } = await setup();
    const keep = join(src, "keep.txt");
    writeFileSync(keep, text(5000, 99));
    for (let i = 0; i < 30; i++) writeFileSync(join(src, `gone${i}.bin`), bytes(60_000, 500 + i));
    await snapshotTree(store, src);
    clock.advance(1000);
    for (let i = 0; i < 30; i++) rmSync(join(src, `gone${i}.bin`));
    const kept = await snapshotTree(store, src);
    const p1 = await prune(store, { policy: { keepLast: 1 } });
    expect(p1.repacked.packs).toBeGreaterThan(0);
    expect(p1.repacked.blobs).toBeGreaterThan(0);
    clock.advance(GRACE);
    const p2 = await prune(store);
    expect(p2.deleted.packs).toBeGreaterThanOrEqual(p1.repacked.packs);
    expect((await check(store, { readData: true })).errors).toEqual([]);
    await restoresAs(store, kept.id, describeTree(src));
    store.close();
  });
});

describe("prune racing a save, live", () => {
  test(
    "a save loop and a prune loop in two processes: every finished snapshot stays whole",
    async () => {
      const home = tempDir();
      const src = join(home, "ws");
      mkdirSync(src);
      smallFiles(src, 4, 25, 21);
      const { store, loc } = await newStore({ home, graceMs: 1500 });
      store.close();
      const worker = join(import.meta.dir, "snapshot-worker.ts");
      const log = join(home, "saved.ndjson");
      const spec = JSON.stringify({ ...loc, src, log });
      const until = Date.now() + 12_000;
      const run = (op: string) => Bun.spawn(["bun", worker, op, spec, String(until)], { stdout: "pipe", stderr: "pipe" });
      const saver = run("save-loop");
      const pruner = run("prune-loop");
      const [saverOut, prunerOut, saverErr, prunerErr] = await Promise.all([
        new Response(saver.stdout).text(),
        new Response(pruner.stdout).text(),
        new Response(saver.stderr).text(),
        new Response(pruner.stderr).text(),
        saver.exited,
        pruner.exited,
      ]);
      expect({ code: saver.exitCode, err: saver.exitCode === 0 ? "" : saverErr }).toEqual({ code: 0, err: "" });
      expect({ code: pruner.exitCode, err: pruner.exitCode === 0 ? "" : prunerErr }).toEqual({ code: 0, err: "" });
      const saves = JSON.parse(saverOut.trim().split("\n").pop()!) as { saved: number; refused: number };
      const prunes = JSON.parse(prunerOut.trim().split("\n").pop()!) as { runs: number; deleted: number };
      expect(saves.saved).toBeGreaterThan(5);
      expect(prunes.runs).toBeGreaterThan(3);
      expect(prunes.deleted).toBeGreaterThan(0);

      const { openStore } = await import("../src/snapshot/index.ts");
      const reopened = await openStore(loc);
      expect((await check(reopened, { readData: true })).errors).toEqual([]);
      const expected = new Map<string, Record<string, string>>();
      for (const line of readFileSync(log, "utf8").trim().split("\n")) {
        const { id, files } = JSON.parse(line) as { id: string; files: Record<string, string> };
        expected.set(id, files);
      }
      const remaining = await listSnapshots(reopened);
      expect(remaining.length).toBeGreaterThan(0);
      for (const s of remaining) {
        const dest = join(tempDir(), "out");
        await restoreTree(reopened, s.id, dest);
        const files = expected.get(s.id)!;
        for (const [rel, digest] of Object.entries(files)) {
          expect(existsSync(join(dest, rel))).toBe(true);
          expect(new Bun.CryptoHasher("sha256").update(readFileSync(join(dest, rel))).digest("hex")).toBe(digest);
        }
      }
      reopened.close();
    },
    { timeout: 120_000 },
  );
});
