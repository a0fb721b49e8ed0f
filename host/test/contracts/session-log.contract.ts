// The session log's contract: what every backend of SessionLog (store/types.ts)
// must do. seqs are the store's alone: gapless from 1 per session, whichever
// handle appends; an idempotency key stores its event once; a batch, and what
// commits with it, is all or nothing; what was acknowledged is there after a
// reopen. The event log's part of this, in its async form (SessionLogAsync),
// is session-log-async.contract.ts; both backends run that one.
import { describe, expect, test } from "bun:test";
import { type Actor, emit, emptyTurn, Events } from "@hutch/shared";
import type { NewEvent, NewSessionRow, SessionLog, SessionLogAsync } from "../../src/store/types.ts";
import { fails, type MakeStorage, type StorageTest, withStorage } from "./storage.ts";

export const alice: Actor = { kind: "user", id: "alice" };
export const system: Actor = { kind: "system", id: "hutch" };

export const note = (text: string, idempotencyKey?: string): NewEvent => ({
  ...emit(Events.annotationAdded, { text }),
  actor: alice,
  ...(idempotencyKey ? { idempotencyKey } : {}),
});
export const checkpoint = (name: string): NewEvent => ({ ...emit(Events.checkpointCreated, { name }), actor: system });

let clock = Date.parse("2026-01-01T00:00:00Z");
export function session(id: string, over: Partial<NewSessionRow> = {}): NewSessionRow {
  clock += 1000;
  return {
    id,
    box_id: "box_a",
    agent: "shell",
    label: null,
    state: "open",
    owner: "alice",
    argv: '["bash"]',
    pty: null,
    created_at: new Date(clock).toISOString(),
    ...over,
  };
}

export interface Line {
  session: string;
  seq: number;
  at: string;
  actor: Actor;
  kind: string;
  data: { text?: string; name?: string };
}

export async function read(
  log: Pick<SessionLog, "readText"> | Pick<SessionLogAsync, "readText">,
  id: string,
  from = 1,
  limit = 1000,
): Promise<Line[]> {
  const { text } = await log.readText(id, from, limit);
  return text ? text.split("\n").map((l) => JSON.parse(l) as Line) : [];
}

const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);

export function describeSessionLogContract(name: string, make: MakeStorage<SessionLog>): void {
  const run = (fn: StorageTest<SessionLog>) => () => withStorage(make, fn);

  describe(`SessionLog contract: ${name}`, () => {
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
    );

    test(
      "readText pages by from and limit and joins with the separator asked for",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.append(
          "ses_1",
          ["a", "b", "c", "d", "e"].map((t) => note(t)),
        );
        const page = await log.readText("ses_1", 2, 2);
        expect(page.count).toBe(2);
        expect(page.last).toBe(3);
        expect(page.text.split("\n").map((l) => (JSON.parse(l) as Line).seq)).toEqual([2, 3]);
        expect(await log.readText("ses_1", 6, 10)).toEqual({ text: "", count: 0, last: 5 });
        const json = await log.readText("ses_1", 1, 10, ",");
        expect((JSON.parse(`[${json.text}]`) as Line[]).map((l) => l.data.text)).toEqual(["a", "b", "c", "d", "e"]);
      }),
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
        // A key belongs to its session: the same key elsewhere is a new event.
        expect((await log.append("ses_2", [note("other", "k1")]))[0]).toMatchObject({ seq: 1, fresh: true });
      }),
    );

    test(
      "an append to a session that does not exist throws and stores nothing",
      run(async (log) => {
        await fails(() => log.append("ses_missing", [note("a")]), /ses_missing/);
        expect(await log.last("ses_missing")).toBe(0);
        expect((await log.readText("ses_missing", 1, 10)).count).toBe(0);
      }),
    );

    test(
      "a batch and what commits with it are all or nothing",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await fails(
          () =>
            log.append("ses_1", [note("a"), note("b")], () => {
              throw new Error("the row update failed");
            }),
          /row update failed/,
        );
        expect(await log.last("ses_1")).toBe(0);
        expect((await log.readText("ses_1", 1, 10)).count).toBe(0);
        await log.append("ses_1", [note("c")], () => log.update("ses_1", { driver: JSON.stringify(alice) }));
        expect((await log.get("ses_1"))?.driver).toBe(JSON.stringify(alice));
        expect((await read(log, "ses_1")).map((l) => [l.seq, l.data.text])).toEqual([[1, "c"]]);
      }),
    );

    test(
      "a transaction's appends and chunks roll back together",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await fails(
          () =>
            log.transaction(() => {
              log.addChunk("ses_1", bytes(10, 1));
              log.append("ses_1", [note("a")]);
              throw new Error("abandoned");
            }),
          /abandoned/,
        );
        expect(await log.last("ses_1")).toBe(0);
        expect(await log.chunk("ses_1", 0)).toBeNull();
        const chunk = await log.transaction(() => {
          const n = log.addChunk("ses_1", bytes(10, 2));
          log.append("ses_1", [note("b")]);
          return n;
        });
        expect(chunk).toBe(0);
        expect(await log.chunk("ses_1", 0)).toEqual(bytes(10, 2));
        expect(await log.last("ses_1")).toBe(1);
      }),
    );

    test(
      "onStored sees every new event once, with its seq, and a hook that throws undoes the append",
      run(async (log) => {
        await log.insert(session("ses_1"));
        const seen: [string, number, string][] = [];
        let fail = false;
        await log.onStored((id, seq, _at, e) => {
          if (fail) throw new Error("the summary could not be written");
          seen.push([id, seq, e.kind]);
        });
        await log.append("ses_1", [note("a", "k"), checkpoint("c")]);
        await log.append("ses_1", [note("a again", "k")]);
        expect(seen).toEqual([
          ["ses_1", 1, "annotation.added"],
          ["ses_1", 2, "checkpoint.created"],
        ]);
        fail = true;
        await fails(() => log.append("ses_1", [note("b")]), /summary could not be written/);
        expect(await log.last("ses_1")).toBe(2);
        expect((await log.readText("ses_1", 1, 10)).count).toBe(2);
      }),
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
    );

    test(
      "appends racing from two handles, retries included: every event lands once, seqs gapless",
      run(async (a, more) => {
        const b = (await more()).store;
        await a.insert(session("ses_1"));
        const n = 40;
        // Each event is sent through both handles at once, as a client retrying through another server would.
        const sent = Array.from({ length: n }, (_, i) =>
          [a, b].map((log) => Promise.resolve().then(() => log.append("ses_1", [note(`e${i}`, `key-${i}`)]))),
        );
        const results = await Promise.all(sent.flat());
        const seqs = results.map((r) => r[0]!.seq);
        for (let i = 0; i < n; i++) expect(seqs[2 * i]).toBe(seqs[2 * i + 1]!);
        expect(results.filter((r) => r[0]!.fresh)).toHaveLength(n);
        const lines = await read(b, "ses_1");
        expect(lines.map((l) => l.seq)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
        expect(new Set(lines.map((l) => l.data.text)).size).toBe(n);
        expect(await a.last("ses_1")).toBe(n);
      }),
    );

    test(
      "what was acknowledged is there after a reopen",
      run(async (first, _more, reopen) => {
        await first.insert(session("ses_1", { label: "kept" }));
        await first.append("ses_1", [note("a", "k"), note("b"), checkpoint("c")]);
        await first.addChunk("ses_1", bytes(5, 7));
        await first.update("ses_1", { pty: "pty_1" });
        await first.summaries.setTurn("ses_1", { ...emptyTurn(), input: 2 });
        await first.summaries.addAnchor("ses_1", 1);
        const before = await read(first, "ses_1");
        const again = await reopen();
        expect(await read(again, "ses_1")).toEqual(before);
        expect(await again.get("ses_1")).toMatchObject({ label: "kept", pty: "pty_1", last_seq: 3, pty_chunks: 1, pty_bytes: 5 });
        expect(await again.chunk("ses_1", 0)).toEqual(bytes(5, 7));
        expect(await again.summaries.turn("ses_1")).toEqual({ ...emptyTurn(), input: 2 });
        expect((await again.summaries.anchors("ses_1", 10)).map((r) => r.seq)).toEqual([1]);
        expect((await again.append("ses_1", [note("a", "k"), note("d")])).map((r) => [r.seq, r.fresh])).toEqual([
          [1, false],
          [4, true],
        ]);
      }),
    );

    test(
      "a taken session id is refused",
      run(async (log) => {
        await log.insert(session("ses_1", { label: "first" }));
        await fails(() => log.insert(session("ses_1", { label: "second" })));
        expect((await log.get("ses_1"))?.label).toBe("first");
      }),
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
        await log.update("ses_2", { state: "closed", closed_at: new Date(clock).toISOString() });
        await log.update("ses_3", {});
        expect(await log.get("ses_1")).toMatchObject({ state: "open", driver, driver_lease_ms: 500, driver_expires_at: 1000 });
        expect(await log.get("ses_2")).toMatchObject({ state: "closed", driver, driver_expires_at: 900 });
        expect(await log.get("ses_3")).toMatchObject({ state: "open", driver: null, closed_at: null });
        expect((await log.expiredLeases(1000)).map((r) => r.id)).toEqual([]);
        expect((await log.expiredLeases(1001)).map((r) => r.id)).toEqual(["ses_1"]);
        await log.update("ses_1", { driver: null, driver_lease_ms: null, driver_expires_at: null });
        expect(await log.expiredLeases(5000)).toEqual([]);
      }),
    );

    test(
      "kindBefore reads one kind at or before a seq, newest first, as stored JSON",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.append("ses_1", [note("a"), checkpoint("c2"), note("b"), checkpoint("c4"), checkpoint("c5")]);
        const found = await log.kindBefore("ses_1", "checkpoint.created", 4, 10);
        expect(found.map((e) => [e.seq, (JSON.parse(e.data) as { name: string }).name, JSON.parse(e.actor)])).toEqual([
          [4, "c4", system],
          [2, "c2", system],
        ]);
        expect((await log.kindBefore("ses_1", "checkpoint.created", 5, 1)).map((e) => e.seq)).toEqual([5]);
        expect(await log.kindBefore("ses_1", "checkpoint.created", 1, 10)).toEqual([]);
      }),
    );

    test(
      "terminal chunks are numbered from 0 and read back byte-exact; one never stored is null",
      run(async (log) => {
        await log.insert(session("ses_1"));
        expect(await log.addChunk("ses_1", bytes(3, 1))).toBe(0);
        expect(await log.addChunk("ses_1", new Uint8Array([0, 255, 10, 13]))).toBe(1);
        expect(await log.chunk("ses_1", 0)).toEqual(bytes(3, 1));
        expect(await log.chunk("ses_1", 1)).toEqual(new Uint8Array([0, 255, 10, 13]));
        expect(await log.chunk("ses_1", 2)).toBeNull();
        expect(await log.get("ses_1")).toMatchObject({ pty_chunks: 2, pty_bytes: 7, pty_dropped: 0 });
      }),
    );

    test(
      "a session's cap drops its oldest chunks down to 7/8 of it, and says what it dropped",
      run(async (log) => {
        await log.insert(session("ses_1"));
        const caps = { session: 1000, box: 0, user: 0 };
        for (let i = 0; i < 10; i++) await log.addChunk("ses_1", bytes(100, i));
        expect(await log.trimChunks("ses_1", caps)).toEqual([]);
        await log.addChunk("ses_1", bytes(100, 10));
        // 1100 bytes: down to 875, so three chunks go, not just the one that would do.
        expect(await log.trimChunks("ses_1", caps)).toEqual([
          { sessionId: "ses_1", fromChunk: 0, toChunk: 2, offset: 0, bytes: 300, cap: "session", limit: 1000 },
        ]);
        expect(await log.chunk("ses_1", 0)).toBe("dropped");
        expect(await log.chunk("ses_1", 2)).toBe("dropped");
        expect(await log.chunk("ses_1", 3)).toEqual(bytes(100, 3));
        for (let i = 11; i < 15; i++) await log.addChunk("ses_1", bytes(100, i));
        expect(await log.trimChunks("ses_1", caps)).toEqual([
          { sessionId: "ses_1", fromChunk: 3, toChunk: 6, offset: 300, bytes: 400, cap: "session", limit: 1000 },
        ]);
        expect(await log.get("ses_1")).toMatchObject({ pty_chunks: 15, pty_bytes: 800, pty_dropped: 700 });
      }),
    );

    test(
      "a box's and a user's caps take from the session holding the most first",
      run(async (log) => {
        await log.insert(session("ses_big", { box_id: "box_a" }));
        await log.insert(session("ses_small", { box_id: "box_a" }));
        await log.insert(session("ses_else", { box_id: "box_b" }));
        await log.insert(session("ses_bob", { box_id: "box_b", owner: "bob" }));
        for (let i = 0; i < 3; i++) await log.addChunk("ses_big", bytes(200, i));
        await log.addChunk("ses_small", bytes(200, 9));
        await log.addChunk("ses_bob", bytes(900, 9));
        const byBox = await log.trimChunks("ses_small", { session: 0, box: 700, user: 0 });
        expect(byBox).toEqual([{ sessionId: "ses_big", fromChunk: 0, toChunk: 0, offset: 0, bytes: 200, cap: "box", limit: 700 }]);
        expect(await log.chunk("ses_small", 0)).toEqual(bytes(200, 9));
        await log.addChunk("ses_else", bytes(300, 5));
        // alice holds 400 + 200 + 300 bytes; bob's 900 are not hers to give up.
        const byUser = await log.trimChunks("ses_else", { session: 0, box: 0, user: 800 });
        expect(byUser).toEqual([{ sessionId: "ses_big", fromChunk: 1, toChunk: 1, offset: 200, bytes: 200, cap: "user", limit: 800 }]);
        expect(await log.chunk("ses_bob", 0)).toEqual(bytes(900, 9));
      }),
    );

    test(
      "summaries: a turn is kept per session, anchors once each, latest first cut oldest first",
      run(async (log) => {
        await log.insert(session("ses_1"));
        await log.insert(session("ses_2"));
        await log.append("ses_1", [note("a"), checkpoint("c"), note("b"), note("d")]);
        const s = log.summaries;
        expect(await s.turn("ses_1")).toBeNull();
        await s.setTurn("ses_1", { ...emptyTurn(), started: 2 });
        await s.setTurn("ses_1", { ...emptyTurn(), started: 3 });
        expect(await s.turn("ses_1")).toEqual({ ...emptyTurn(), started: 3 });
        expect(await s.turn("ses_2")).toBeNull();
        for (const seq of [1, 3, 3, 4]) await s.addAnchor("ses_1", seq);
        const all = await s.anchors("ses_1", 10);
        expect(all.map((r) => [r.seq, (r.data as { text: string }).text, r.actor])).toEqual([
          [1, "a", alice],
          [3, "b", alice],
          [4, "d", alice],
        ]);
        expect((await s.anchors("ses_1", 2)).map((r) => r.seq)).toEqual([3, 4]);
        expect(await s.anchors("ses_2", 10)).toEqual([]);
        const events = await s.eventsOf("ses_1", ["checkpoint.created", "annotation.added"]);
        expect(events.map((e) => [e.seq, e.kind])).toEqual([
          [1, "annotation.added"],
          [2, "checkpoint.created"],
          [3, "annotation.added"],
          [4, "annotation.added"],
        ]);
        expect((await s.eventsOf("ses_1", ["checkpoint.created"]))[0]).toMatchObject({ seq: 2, actor: system, data: { name: "c" } });
      }),
    );
  });
}
