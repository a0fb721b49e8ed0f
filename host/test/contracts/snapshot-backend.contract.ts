// The snapshot store backend's contract: what every Backend
// (snapshot/backend.ts, re-exported by store/types.ts as SnapshotBackend)
// must do. Objects are immutable: written once, whole or not at all, never
// replaced, read whole or by range, listed, deleted; names are checked before
// anything is touched.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stagingFile } from "../../src/snapshot/backend.ts";
import type { ObjectKind, SnapshotBackend } from "../../src/store/types.ts";
import { type MakeStorage, type StorageTest, withStorage } from "./storage.ts";

const name = (n: number) => n.toString(16).padStart(2, "0").repeat(32);
const bytes = (...b: number[]) => new Uint8Array(b);
const text = (s: string) => new TextEncoder().encode(s);

async function names(b: SnapshotBackend, kind: ObjectKind): Promise<string[]> {
  const out: string[] = [];
  for await (const o of b.list(kind)) out.push(o.name);
  return out.sort();
}

/** Expects `p` to reject with a StoreError of `code` naming `object`. */
async function refused(p: Promise<unknown>, code: string, object?: string): Promise<void> {
  const err = await p.then(
    () => null,
    (e: unknown) => e as { code?: string; data?: { object?: string } },
  );
  expect(err).not.toBeNull();
  expect(err?.code).toBe(code);
  if (object) expect(err?.data?.object).toBe(object);
}

export function describeSnapshotBackendContract(label: string, make: MakeStorage<SnapshotBackend>): void {
  const run = (fn: StorageTest<SnapshotBackend>) => () => withStorage(make, fn);

  describe(`SnapshotBackend contract: ${label}`, () => {
    test(
      "put stores an object whole; get reads it, or a range of it; list gives its size",
      run(async (b) => {
        const data = text("0123456789");
        expect(await b.put("index", name(1), data)).toBe(true);
        expect(await b.get("index", name(1))).toEqual(data);
        expect(await b.get("index", name(1), { offset: 3, length: 4 })).toEqual(text("3456"));
        expect(await b.get("index", name(1), { offset: 10, length: 0 })).toEqual(new Uint8Array(0));
        const listed: { name: string; size: number; mtimeMs: number }[] = [];
        for await (const o of b.list("index")) listed.push(o);
        expect(listed.map((o) => [o.name, o.size])).toEqual([[name(1), 10]]);
        expect(listed[0]!.mtimeMs).toBeGreaterThan(0);
        expect(await b.put("snapshots", name(2), new Uint8Array(0))).toBe(true);
        expect(await b.get("snapshots", name(2))).toEqual(new Uint8Array(0));
      }),
    );

    test(
      "put never replaces: a taken name answers false and keeps the first bytes",
      run(async (b) => {
        expect(await b.put("snapshots", name(1), text("first"))).toBe(true);
        expect(await b.put("snapshots", name(1), text("second"))).toBe(false);
        expect(await b.get("snapshots", name(1))).toEqual(text("first"));
        expect(await b.put("config", "config", text("c1"))).toBe(true);
        expect(await b.put("config", "config", text("c2"))).toBe(false);
        expect(await b.get("config", "config")).toEqual(text("c1"));
      }),
    );

    test(
      "puts of one name racing from two handles: exactly one wins, whole",
      run(async (a, more) => {
        const b = (await more()).store;
        const datas = [0, 1, 2, 3, 4, 5].map((i) => new Uint8Array(4096).fill(i));
        const won = await Promise.all(datas.map((d, i) => (i % 2 ? a : b).put("packs", name(9), d)));
        expect(won.filter(Boolean)).toHaveLength(1);
        expect(await a.get("packs", name(9))).toEqual(datas[won.indexOf(true)]!);
      }),
    );

    test(
      "a missing object is a not_found error naming it; a range past its end is refused",
      run(async (b) => {
        await refused(b.get("packs", name(1)), "not_found", `packs/${name(1)}`);
        await refused(b.get("config", "config"), "not_found", "config/config");
        await b.put("marks", name(2), text("abc"));
        await refused(b.get("marks", name(2), { offset: 1, length: 5 }), "failed", `marks/${name(2)}`);
      }),
    );

    test(
      "names are checked before anything is touched",
      run(async (b) => {
        const bad: [ObjectKind, string][] = [
          ["packs", "../../etc/passwd"],
          ["snapshots", name(0xab).toUpperCase()],
          ["index", name(1).slice(1)],
          ["config", "other"],
          ["locks", "Not A Lock"],
          ["locks", "../x"],
        ];
        for (const [kind, n] of bad) {
          await refused(
            Promise.resolve().then(() => b.put(kind, n, text("x"))),
            "invalid",
          );
          await refused(
            Promise.resolve().then(() => b.get(kind, n)),
            "invalid",
          );
          await refused(
            Promise.resolve().then(() => b.delete(kind, n)),
            "invalid",
          );
        }
        expect(readdirSync(b.stagingDir())).toEqual([]);
        expect(await b.put("locks", "prune", text("l"))).toBe(true);
        expect(await names(b, "locks")).toEqual(["prune"]);
      }),
    );

    test(
      "list names every object of its kind and no other, never a partly written one",
      run(async (b) => {
        for (const n of [0x01, 0xa0, 0xa1, 0xff]) await b.put("packs", name(n), bytes(n));
        await b.put("snapshots", name(7), bytes(7));
        await b.put("config", "config", bytes(1));
        await b.put("locks", "prune", bytes(2));
        writeFileSync(stagingFile(b), "half a pack");
        expect(await names(b, "packs")).toEqual([name(0x01), name(0xa0), name(0xa1), name(0xff)]);
        expect(await names(b, "snapshots")).toEqual([name(7)]);
        expect(await names(b, "config")).toEqual(["config"]);
        expect(await names(b, "locks")).toEqual(["prune"]);
        expect(await names(b, "index")).toEqual([]);
        expect(await names(b, "marks")).toEqual([]);
        expect(await names(b, "saves")).toEqual([]);
      }),
    );

    test(
      "putFile stores a whole file, from the staging directory or elsewhere, and consumes it",
      run(async (b) => {
        const staged = stagingFile(b);
        writeFileSync(staged, "from staging");
        expect(await b.putFile("packs", name(1), staged)).toBe(true);
        expect(existsSync(staged)).toBe(false);
        expect(await b.get("packs", name(1))).toEqual(text("from staging"));
        const dir = mkdtempSync(join(tmpdir(), "hutch-putfile-"));
        try {
          const outside = join(dir, "file");
          writeFileSync(outside, "from elsewhere");
          expect(await b.putFile("packs", name(2), outside)).toBe(true);
          expect(existsSync(outside)).toBe(false);
          expect(await b.get("packs", name(2))).toEqual(text("from elsewhere"));
          const again = stagingFile(b);
          writeFileSync(again, "a second time");
          expect(await b.putFile("packs", name(2), again)).toBe(false);
          expect(await b.get("packs", name(2))).toEqual(text("from elsewhere"));
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }),
    );

    test(
      "delete removes an object, even one just read; deleting a missing one is no error",
      run(async (b) => {
        await b.put("packs", name(1), text("pack"));
        await b.put("packs", name(2), text("kept"));
        expect(await b.get("packs", name(1), { offset: 0, length: 2 })).toEqual(text("pa"));
        await b.delete("packs", name(1));
        await refused(b.get("packs", name(1)), "not_found");
        expect(await names(b, "packs")).toEqual([name(2)]);
        await b.delete("packs", name(1));
        await b.delete("snapshots", name(3));
        // The name is free again: put stores anew.
        expect(await b.put("packs", name(1), text("new"))).toBe(true);
        expect(await b.get("packs", name(1))).toEqual(text("new"));
      }),
    );

    test(
      "another handle sees what one stored; close leaves a handle usable; a reopen keeps every object",
      run(async (a, more, reopen) => {
        await a.put("packs", name(1), text("p1"));
        await a.put("config", "config", text("cfg"));
        const b = (await more()).store;
        expect(await b.get("packs", name(1))).toEqual(text("p1"));
        expect(await b.put("packs", name(1), text("other"))).toBe(false);
        await b.put("snapshots", name(2), text("s2"));
        expect(await a.get("snapshots", name(2))).toEqual(text("s2"));
        a.close();
        expect(await a.get("packs", name(1), { offset: 1, length: 1 })).toEqual(text("1"));
        const again = await reopen();
        expect(await names(again, "packs")).toEqual([name(1)]);
        expect(await again.get("config", "config")).toEqual(text("cfg"));
        expect(await again.get("snapshots", name(2))).toEqual(text("s2"));
        expect(again.location).toBeString();
      }),
    );
  });
}
