// The session log's contract in its async form (SessionLogAsync, store/types.ts),
// run by every backend: SQLite through asyncSessionLog, JetStream natively.
// seqs are the store's alone: gapless from 1 per session, whichever handle
// appends; an idempotency key stores its event once; a batch and its row
// change are all or none; a stale compare-and-set stores nothing; a reader
// follows replay-then-tail and resumes from any seq; what was acknowledged
// is there after a reopen.
import { describe, expect, test } from "bun:test";
import { HutchError } from "@hutch/shared";
import type { SessionLogAsync, StoredLine } from "../../src/store/types.ts";
import { alice, checkpoint, type Line, note, read, session, system } from "./session-log.contract.ts";
import { fails, type MakeStorage, type StorageTest, withStorage } from "./storage.ts";

/** The first `n` lines `follow` yields from `from`, or what it had when `ms` ran out. */
async function follow(log: SessionLogAsync, id: string, from: number, n: number, ms = 20_000): Promise<StoredLine[]> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), ms);
  const got: StoredLine[] = [];
  try {
    for await (const line of log.follow(id, from, stop.signal)) {
      got.push(line);
      if (got.length >= n) break;
    }
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
  return got;
}

export function describeSessionLogAsyncContract(name: string, make: MakeStorage<SessionLogAsync>, timeout = 30_000): void {
  const run = (fn: StorageTest<SessionLogAsync>) => () => withStorage(make, fn);

  describe(`SessionLogAsync contract: ${name}`, () => {
    test(
      "appends get gapless seqs from 1, in order, and read back as the same wire JSON",
      run(async (log) => {
        await log.insert(session("ses_1"));
        const first = await log.append("ses_1", [note("a"), note("b")]);
        const second = await log.append("ses_1", [note("c")]);
        expect([...first, ...second].map((r) => [r.seq, r.fresh])).toEqual([
          [1, true],
          [2, true],
          [3, true],
        ]);
        const lines = await read(log, "ses_1");
        expect(lines.map((l) => [l.session, l.seq, l.kind, l.data.text, l.actor])).toEqual([
          ["ses_1", 1, "annotation.added", "a", alice],
          ["ses_1", 2, "annotation.added", "b", alice],
          ["ses_1", 3, "annotation.added", "c", alice],
        ]);
        expect(lines.every((l) => !Number.isNaN(Date.parse(l.at)))).toBe(true);
        expect([...first, ...second].map((r) => JSON.parse(r.json))).toEqual(lines);
        expect(await log.last("ses_1")).toBe(3);
        expect((await log.get("ses_1"))?.last_seq).toBe(3);
      }),
      timeout,
    );

    test(
      "readText pages by from and limit and joins with the separator asked for",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.append("ses_1", [note("a"), note("b")]);
        await log.append("ses_1", [note("c"), note("d"), note("e")]);
        const page = await log.readText("ses_1", 2, 2);
        expect(page.count).toBe(2);
        expect(page.last).toBe(3);
        expect(page.text.split("\n").map((l) => (JSON.parse(l) as Line).seq)).toEqual([2, 3]);
        expect((await log.readText("ses_1", 4, 1)).text).toContain('"text":"d"');
        expect(await log.readText("ses_1", 6, 10)).toEqual({ text: "", count: 0, last: 5 });
        const json = await log.readText("ses_1", 1, 10, ",");
        expect((JSON.parse(`[${json.text}]`) as Line[]).map((l) => l.data.text)).toEqual(["a", "b", "c", "d", "e"]);
      }),
      timeout,
    );

    test(
      "a page given a length ends at the event that reaches it, with at least one",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.append("ses_1", [note("a".repeat(100)), note("b".repeat(100)), note("c".repeat(100)), note("d")]);
        const whole = await log.readText("ses_1", 1, 10);
        const first = whole.text.split("\n")[0]!.length;
        // One character past the first line: the second line reaches it and ends the page.
        const two = await log.readText("ses_1", 1, 10, "\n", first + 1);
        expect([two.count, two.last]).toEqual([2, 2]);
        expect(two.text).toBe(whole.text.split("\n").slice(0, 2).join("\n"));
        expect(await log.readText("ses_1", 2, 10, ",", 1)).toMatchObject({ count: 1, last: 2 });
        // The limit still holds under a length that would take more.
        expect(await log.readText("ses_1", 1, 3, "\n", 1_000_000)).toMatchObject({ count: 3, last: 3 });
        expect(await log.readText("ses_1", 5, 10, "\n", 1)).toEqual({ text: "", count: 0, last: 4 });
      }),
      timeout,
    );

    test(
      "each session has its own seqs",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.insert(session("ses_2"));
        await log.append("ses_1", [note("a1"), note("a2")]);
        const [b] = await log.append("ses_2", [note("b1")]);
        expect(b!.seq).toBe(1);
        expect((await read(log, "ses_2")).map((l) => l.data.text)).toEqual(["b1"]);
        expect(await log.last("ses_1")).toBe(2);
      }),
      timeout,
    );

    test(
      "an idempotency key stores its event once and answers with the first seq",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.insert(session("ses_2"));
        expect((await log.append("ses_1", [note("once", "k1")]))[0]).toMatchObject({ seq: 1, fresh: true });
        const again = await log.append("ses_1", [note("twice", "k1"), note("new")]);
        expect(again.map((r) => [r.seq, r.fresh])).toEqual([
          [1, false],
          [2, true],
        ]);
        const inBatch = await log.append("ses_1", [note("x", "k2"), note("y", "k2")]);
        expect(inBatch.map((r) => [r.seq, r.fresh])).toEqual([
          [3, true],
          [3, false],
        ]);
        expect((await read(log, "ses_1")).map((l) => l.data.text)).toEqual(["once", "new", "x"]);
        expect((await log.append("ses_2", [note("other", "k1")]))[0]).toMatchObject({ seq: 1, fresh: true });
      }),
      timeout,
    );

    test(
      "an append to a session that does not exist rejects and stores nothing",
      run(async (log) => {
        await fails(() => log.append("ses_missing", [note("a")]), /ses_missing/);
        await fails(() => log.append("ses_missing", [note("a")], { ifLast: 0 }), /ses_missing/);
        expect(await log.last("ses_missing")).toBe(0);
        expect((await log.readText("ses_missing", 1, 10)).count).toBe(0);
        expect(await log.get("ses_missing")).toBeNull();
      }),
      timeout,
    );

    test(
      "fields commit with their events; a stale ifLast is a conflict and stores nothing",
      run(async (log, more) => {
        const other = (await more()).store;
        await log.insert(session("ses_1"));
        const driver = JSON.stringify(alice);
        // The driver slot: both writers read it free at last seq 0; one takes it.
        const taken = await log.append("ses_1", [note("acquired")], { ifLast: 0, fields: { driver, driver_lease_ms: 500 } });
        expect(taken.map((r) => r.seq)).toEqual([1]);
        const lost = other.append("ses_1", [note("acquired too")], { ifLast: 0, fields: { driver: '{"kind":"user","id":"bob"}' } });
        await expect(lost).rejects.toBeInstanceOf(HutchError);
        await expect(lost).rejects.toMatchObject({ code: "conflict" });
        for (const h of [log, other]) {
          expect(await h.get("ses_1")).toMatchObject({ driver, driver_lease_ms: 500, last_seq: 1 });
          expect((await read(h, "ses_1")).map((l) => l.data.text)).toEqual(["acquired"]);
        }
        await other.append("ses_1", [note("released")], { ifLast: 1, fields: { driver: null, driver_lease_ms: null } });
        expect(await log.get("ses_1")).toMatchObject({ driver: null, driver_lease_ms: null, last_seq: 2 });
      }),
      timeout,
    );

    test(
      "update and append interleave in the order they were made",
      run(async (log, more) => {
        const other = (await more()).store;
        await log.insert(session("ses_1"));
        await log.append("ses_1", [note("a")], { fields: { pty: "pty_1" } });
        await other.update("ses_1", { pty: "pty_2", state: "closed" });
        await log.append("ses_1", [note("b")], { fields: { driver_expires_at: 42 } });
        for (const h of [log, other]) expect(await h.get("ses_1")).toMatchObject({ pty: "pty_2", state: "closed", driver_expires_at: 42 });
      }),
      timeout,
    );

    test(
      "two handles on one log: seqs stay gapless whichever appends, and keys are seen by both",
      run(async (a, more) => {
        const b = (await more()).store;
        await a.insert(session("ses_1"));
        expect((await b.get("ses_1"))?.id).toBe("ses_1");
        for (let i = 0; i < 10; i++) {
          await a.append("ses_1", [note(`a${i}`)]);
          await b.append("ses_1", [note(`b${i}`)]);
        }
        expect((await a.append("ses_1", [note("once", "shared-key")]))[0]).toMatchObject({ seq: 21, fresh: true });
        expect((await b.append("ses_1", [note("twice", "shared-key")]))[0]).toMatchObject({ seq: 21, fresh: false });
        for (const log of [a, b]) {
          const lines = await read(log, "ses_1");
          expect(lines.map((l) => l.seq)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
          expect(lines.slice(0, 4).map((l) => l.data.text)).toEqual(["a0", "b0", "a1", "b1"]);
          expect(await log.last("ses_1")).toBe(21);
        }
      }),
      timeout,
    );

    test(
      "appends racing from two handles, retries included: every event lands once, seqs gapless",
      run(async (a, more) => {
        const b = (await more()).store;
        await a.insert(session("ses_1"));
        const n = 40;
        const sent = Array.from({ length: n }, (_, i) => [a, b].map((log) => log.append("ses_1", [note(`e${i}`, `key-${i}`)])));
        const results = await Promise.all(sent.flat());
        const seqs = results.map((r) => r[0]!.seq);
        for (let i = 0; i < n; i++) expect(seqs[2 * i]).toBe(seqs[2 * i + 1]!);
        expect(results.filter((r) => r[0]!.fresh)).toHaveLength(n);
        const lines = await read(b, "ses_1");
        expect(lines.map((l) => l.seq)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
        expect(new Set(lines.map((l) => l.data.text)).size).toBe(n);
        expect(await a.last("ses_1")).toBe(n);
      }),
      timeout,
    );

    test(
      "follow replays from a seq, then tails what any handle appends, in order, once each",
      run(async (a, more) => {
        const b = (await more()).store;
        await a.insert(session("ses_1"));
        await a.append("ses_1", [note("a1"), note("a2"), note("a3")]);
        const tail = follow(b, "ses_1", 2, 6);
        await Bun.sleep(50);
        await a.append("ses_1", [note("a4")]);
        await b.append("ses_1", [note("b5"), note("b6")]);
        await a.append("ses_1", [note("a7")]);
        const got = await tail;
        expect(got.map((l) => l.seq)).toEqual([2, 3, 4, 5, 6, 7]);
        expect(got.map((l) => (JSON.parse(l.json) as Line).data.text)).toEqual(["a2", "a3", "a4", "b5", "b6", "a7"]);
        expect(got.map((l) => JSON.parse(l.json))).toEqual((await read(a, "ses_1")).slice(1));
        // Resuming where a reader left off repeats nothing.
        expect((await follow(a, "ses_1", 6, 2)).map((l) => l.seq)).toEqual([6, 7]);
        const none = await follow(a, "ses_1", 8, 1, 300);
        expect(none).toEqual([]);
      }),
      timeout,
    );

    test(
      "what was acknowledged is there after a reopen",
      run(async (first, _more, reopen) => {
        await first.insert(session("ses_1", { label: "kept" }));
        await first.append("ses_1", [note("a", "k"), note("b"), checkpoint("c")], { fields: { driver: JSON.stringify(alice) } });
        await first.update("ses_1", { pty: "pty_1" });
        const before = await read(first, "ses_1");
        const again = await reopen();
        expect(await read(again, "ses_1")).toEqual(before);
        expect(await again.get("ses_1")).toMatchObject({ label: "kept", pty: "pty_1", last_seq: 3, driver: JSON.stringify(alice) });
        expect((await again.append("ses_1", [note("a", "k"), note("d")])).map((r) => [r.seq, r.fresh])).toEqual([
          [1, false],
          [4, true],
        ]);
      }),
      timeout,
    );

    test(
      "a taken session id is refused",
      run(async (log, more) => {
        await log.insert(session("ses_1", { label: "first" }));
        await fails(() => log.insert(session("ses_1", { label: "second" })));
        await fails(async () => (await more()).store.insert(session("ses_1", { label: "third" })));
        expect((await log.get("ses_1"))?.label).toBe("first");
      }),
      timeout,
    );

    test(
      "list filters by box and state, oldest first; get of an unknown id is null",
      run(async (log) => {
        await log.insert(session("ses_c", { box_id: "box_a" }));
        await log.insert(session("ses_b", { box_id: "box_b" }));
        await log.insert(session("ses_a", { box_id: "box_a", state: "closed" }));
        const ids = async (f?: { boxId?: string; state?: string }) => (await log.list(f)).map((r) => r.id);
        expect(await ids()).toEqual(["ses_c", "ses_b", "ses_a"]);
        expect(await ids({ boxId: "box_a" })).toEqual(["ses_c", "ses_a"]);
        expect(await ids({ state: "open" })).toEqual(["ses_c", "ses_b"]);
        expect(await ids({ boxId: "box_a", state: "open" })).toEqual(["ses_c"]);
        expect(await ids({ boxId: "box_z" })).toEqual([]);
        expect(await log.get("ses_missing")).toBeNull();
      }),
      timeout,
    );

    test(
      "update changes only the fields given; expiredLeases finds open sessions past their lease",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.insert(session("ses_2"));
        await log.insert(session("ses_3"));
        const driver = JSON.stringify(alice);
        await log.update("ses_1", { driver, driver_lease_ms: 500, driver_expires_at: 1000 });
        await log.update("ses_2", { driver, driver_lease_ms: 500, driver_expires_at: 900 });
        await log.update("ses_2", { state: "closed", closed_at: new Date().toISOString() });
        await log.update("ses_3", {});
        expect(await log.get("ses_1")).toMatchObject({ state: "open", driver, driver_lease_ms: 500, driver_expires_at: 1000 });
        expect(await log.get("ses_2")).toMatchObject({ state: "closed", driver, driver_expires_at: 900 });
        expect(await log.get("ses_3")).toMatchObject({ state: "open", driver: null, closed_at: null });
        expect((await log.expiredLeases(1000)).map((r) => r.id)).toEqual([]);
        expect((await log.expiredLeases(1001)).map((r) => r.id)).toEqual(["ses_1"]);
        await log.update("ses_1", { driver: null, driver_lease_ms: null, driver_expires_at: null });
        expect(await log.expiredLeases(5000)).toEqual([]);
      }),
      timeout,
    );

    test(
      "kindBefore reads one kind at or before a seq, newest first, as stored JSON",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.append("ses_1", [note("a"), checkpoint("c2"), note("b")]);
        await log.append("ses_1", [checkpoint("c4"), checkpoint("c5")]);
        const found = await log.kindBefore("ses_1", "checkpoint.created", 4, 10);
        expect(found.map((e) => [e.seq, (JSON.parse(e.data) as { name: string }).name, JSON.parse(e.actor)])).toEqual([
          [4, "c4", system],
          [2, "c2", system],
        ]);
        expect((await log.kindBefore("ses_1", "checkpoint.created", 5, 1)).map((e) => e.seq)).toEqual([5]);
        expect(await log.kindBefore("ses_1", "checkpoint.created", 1, 10)).toEqual([]);
      }),
      timeout,
    );
  });
}
