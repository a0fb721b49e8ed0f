// Sessions in-process: the store's seq and idempotency rules, and who may see
// what, with an identity per request (a second OS user cannot reach the 0600
// socket at all, so this is where "not allowed to see" is exercised).
import { afterAll, describe, expect, test } from "bun:test";
import { ask, seedSession, testApp } from "./app-helpers.ts";
import { SYSTEM } from "../src/actors.ts";
import { pieces } from "../src/session/service.ts";
import { API_LIMITS, BOX_REASON_MAX, check, EVENT_TEXT_MAX, Events, EventsPage, firstError } from "@hutch/shared";
import { fixtureEvent } from "../../tests/fixtures/events.ts";

// Test identity: the user named by a header. The real daemon's identity is its own OS user.
const { db, app, services, close } = await testApp("hutch-ses-", { identify: (req) => req.headers.get("x-test-user") ?? "alice" });
const { sessions, sessionStore: store } = services;
afterAll(close);

/** A page of events, parsed. */
const read = (session: string, from: number, limit: number) =>
  store
    .readText(session, from, limit)
    .text.split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { seq: number; kind: string; actor: unknown; data: unknown });

const note = (text: string) => fixtureEvent(Events.annotationAdded, { text });

/** A session row without a terminal (no box needs to run for log and driver rules). */
const seed = (owner: string, box = "box_none") => seedSession(store, { owner, box });

const call = (method: string, path: string, user: string, body?: unknown, client = "cli") =>
  ask(app, method, path, { body, headers: { "x-test-user": user, "x-hutch-client": client } });

describe("session store", () => {
  test("seq is gapless per session and independent across sessions", () => {
    const a = seed("alice");
    const b = seed("alice");
    const actor = { kind: "user" as const, id: "alice" };
    const seqsA = store
      .append(
        a,
        Array.from({ length: 5 }, () => ({ ...note("x"), actor })),
      )
      .map((r) => r.seq);
    const seqsB = store.append(b, [{ ...note("y"), actor }]).map((r) => r.seq);
    expect(seqsA).toEqual([1, 2, 3, 4, 5]);
    expect(seqsB).toEqual([1]);
    expect(read(a, 3, 10).map((e) => e.seq)).toEqual([3, 4, 5]);
    expect(read(a, 1, 1)[0]!).toMatchObject({ session: a, seq: 1, actor, kind: "annotation.added", data: { text: "x" } });
  });

  test("a repeated idempotency key returns the first seq, also inside one batch", () => {
    const s = seed("alice");
    const actor = { kind: "user" as const, id: "alice" };
    const first = store.append(s, [{ ...note("a"), actor, idempotencyKey: "k" }]);
    const again = store.append(s, [
      { ...note("a"), actor, idempotencyKey: "k" },
      { ...note("b"), actor, idempotencyKey: "k2" },
      { ...note("b"), actor, idempotencyKey: "k2" },
    ]);
    expect(first.map((r) => [r.seq, r.fresh])).toEqual([[1, true]]);
    expect(again.map((r) => [r.seq, r.fresh])).toEqual([
      [1, false],
      [2, true],
      [2, false],
    ]);
    expect(store.last(s)).toBe(2);
  });

  test("a failed batch stores nothing and does not advance seq", () => {
    const s = seed("alice");
    const actor = { kind: "user" as const, id: "alice" };
    // A NUL-free but unencodable value: a BigInt makes JSON.stringify throw mid-batch.
    expect(() =>
      store.append(s, [
        { ...note("ok"), actor },
        { kind: "annotation.added", data: { n: 1n } as never, actor },
      ]),
    ).toThrow();
    expect(store.last(s)).toBe(0);
    expect(read(s, 1, 10)).toEqual([]);
  });
});

describe("who may see and drive", () => {
  test("another user cannot see, read the log of, annotate or steal the session", async () => {
    const s = seed("alice");
    expect((await call("POST", `/v1/sessions/${s}/driver/acquire`, "alice", {})).status).toBe(200);
    for (const [method, path, body] of [
      ["GET", `/v1/sessions/${s}`, undefined],
      ["GET", `/v1/sessions/${s}/events`, undefined],
      ["POST", `/v1/sessions/${s}/annotations`, { text: "hi" }],
      ["POST", `/v1/sessions/${s}/driver/steal`, {}],
    ] as const) {
      const r = await call(method, path, "mallory", body);
      // Answered as if it did not exist: a 403 would tell mallory the id is real.
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe("not_found");
      expect(r.body.error.message).toBe(`no session "${s}"`);
    }
    expect((await call("GET", "/v1/sessions", "mallory")).body).toEqual([]);
    const kinds = read(s, 1, 100).map((e) => e.kind);
    expect(kinds).toEqual(["session.driver.acquired"]);
    expect(JSON.parse(store.get(s)!.driver!)).toEqual({ kind: "user", id: "alice" });
  });

  test("the actor comes from the connection, never from the body", async () => {
    const s = seed("alice");
    const r = await call("POST", `/v1/sessions/${s}/events`, "alice", {
      events: [{ ...note("t"), actor: { kind: "system", id: "hutchd" } }],
    });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain("actor");
    const ok = await call("POST", `/v1/sessions/${s}/annotations`, "alice", { text: "t" }, "orchestrator");
    expect(ok.status).toBe(200);
    expect(read(s, ok.body.seq, 1)[0]!.actor).toEqual({ kind: "orchestrator", id: "alice/orchestrator" });
  });

  test("an unknown client kind is refused", async () => {
    const s = seed("alice");
    const r = await call("GET", `/v1/sessions/${s}`, "alice", undefined, "root");
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain("x-hutch-client");
  });
});

describe("every event is checked when it is written", () => {
  test("a malformed event the daemon writes is refused by the service, and its whole batch with it", async () => {
    const s = seed("alice");
    // `as never`: the compiler refuses these shapes; a bug that slipped one past it is what this guards.
    const refused = await sessions
      .append(s, [{ kind: "box.state.changed", data: { box: "box_none" } as never, actor: SYSTEM }])
      .catch((err) => err);
    // A daemon that writes what its own registry refuses is broken, not its client: a 500, not a 400.
    expect(refused).toMatchObject({ code: "failed", message: "box.state.changed: data.state: Expected required property" });
    const fine = { ...fixtureEvent(Events.boxStateChanged, { box: "box_none", state: "running" }), actor: SYSTEM };
    await expect(
      sessions.append(s, [
        fine,
        { kind: "egress.allowed", data: { box: "box_none", host: "h", port: 443, bytes: 1 } as never, actor: SYSTEM },
      ]),
    ).rejects.toThrow(/^events\.1\.egress\.allowed: data\.bytesUp/);
    expect(store.last(s)).toBe(0);
    expect(await sessions.append(s, [fine])).toEqual([1]);
  });

  test("a box reason longer than an event holds is cut, not refused", () => {
    const s = seed("alice");
    const boxId = store.get(s)!.box_id;
    sessions.boxChanged(boxId, "failed", "console line\n".repeat(1000));
    const logged = read(s, 1, 10).map((e) => e.data as { reason: string });
    expect(logged.map((d) => d.reason.length)).toEqual([BOX_REASON_MAX]);
  });

  test("typed input is split into pieces an event holds, never inside a surrogate pair", () => {
    expect(pieces("", 4)).toEqual([]);
    expect(pieces("abcdefghij", 4)).toEqual(["abcd", "efgh", "ij"]);
    expect(pieces("abc😀def", 4)).toEqual(["abc", "😀de", "f"]);
    const big = "x".repeat(EVENT_TEXT_MAX * 2 + 1);
    expect(pieces(big, EVENT_TEXT_MAX).map((p) => p.length)).toEqual([EVENT_TEXT_MAX, EVENT_TEXT_MAX, 1]);
  });
});

test("a page of events is the EventsPage shared/src/api.ts defines (the daemon assembles it as text)", async () => {
  const s = seed("alice");
  const actor = { kind: "user" as const, id: "alice" };
  await sessions.append(
    s,
    ["a", "b", "c"].map((t) => ({ ...note(t), actor })),
  );
  const r = await call("GET", `/v1/sessions/${s}/events?from=2&limit=1`, "alice");
  expect(r.status).toBe(200);
  expect(check(EventsPage, r.body) ? null : firstError(EventsPage, r.body)).toBeNull();
  expect(r.body).toMatchObject({ events: [{ seq: 2, kind: "annotation.added", data: { text: "b" } }], next: 3, last: 3 });
});

test("a page of large events ends at the page's length, and the next page goes on from where it stopped", async () => {
  const s = seed("alice");
  const actor = { kind: "user" as const, id: "alice" };
  // 200 events of 60,000 characters: 12 MB, more than one page holds whatever the limit.
  store.append(
    s,
    Array.from({ length: 200 }, (_, i) => ({ ...note(`${i} ${"x".repeat(60_000)}`), actor })),
  );
  const seqs: number[] = [];
  let pages = 0;
  for (let from = 1; ; ) {
    pages++;
    const r = await call("GET", `/v1/sessions/${s}/events?from=${from}&limit=${API_LIMITS.eventsPage}`, "alice");
    const page = r.body as EventsPage;
    expect(JSON.stringify(page.events).length).toBeLessThan(API_LIMITS.eventsPageLength + 70_000);
    seqs.push(...page.events.map((e) => e.seq));
    if (page.next > page.last) break;
    from = page.next;
  }
  expect(pages).toBe(2);
  expect(seqs).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
});

describe("box input follows the driver slot", () => {
  const alice = { kind: "user" as const, id: "alice" };
  const agent = { kind: "agent" as const, id: "alice/agent:claude" };

  test("nobody drives: anyone may send input, and nobody is said to drive", async () => {
    const boxId = "box_inputfree";
    seed("alice", boxId);
    expect(await sessions.boxInput(boxId, agent, false)).toEqual({ driving: false });
  });

  test("the driver may; another actor is refused naming the steal, and a steal takes the slot, logged", async () => {
    const boxId = "box_inputdriven";
    const id = seed("alice", boxId);
    await sessions.acquire(id, alice);
    expect(await sessions.boxInput(boxId, alice, false)).toEqual({ driving: true });
    await expect(sessions.boxInput(boxId, agent, false)).rejects.toThrow(`session ${id} is driven by`);
    expect(await sessions.boxInput(boxId, agent, true)).toEqual({ driving: true });
    expect(sessions.get(id, alice).driver?.actor).toEqual(agent);
    expect(read(id, 1, 100).map((e) => e.kind)).toContain("session.driver.stolen");
    await expect(sessions.boxInput(boxId, alice, false)).rejects.toThrow("is driven by");
  });
});

describe("stored terminal output is capped per session, box and user", () => {
  /** What the store holds for a session: its chunks' bytes, counted from the rows, not from any counter. */
  const stored = (session: string) =>
    (db.query("SELECT COALESCE(SUM(length(data)), 0) AS n FROM pty_chunks WHERE session_id = ?").get(session) as { n: number }).n;
  const kb = new Uint8Array(1000).fill(120);
  const none = { session: 0, box: 0, user: 0 };

  test("a session writing far past its cap keeps its newest bytes under it, one drop per eighth of the cap", async () => {
    const s = seed("carol", "box_capsession");
    const caps = { ...none, session: 16_000 };
    const drops = [];
    for (let i = 0; i < 200; i++) {
      store.addChunk(s, kb);
      drops.push(...store.trimChunks(s, caps));
      expect(stored(s)).toBeLessThanOrEqual(16_000);
    }
    // 200 KB through a 16 KB window that makes room 2 KB at a time: ~92 drops, not ~184 (one per chunk).
    expect(drops.length).toBeLessThanOrEqual(Math.ceil((200_000 - 16_000) / 2_000) + 1);
    expect(drops[0]).toEqual({ sessionId: s, fromChunk: 0, toChunk: 2, offset: 0, bytes: 3000, cap: "session", limit: 16_000 });
    // The ranges follow one another: nothing dropped twice, nothing skipped.
    for (let i = 1; i < drops.length; i++) {
      expect(drops[i]!.fromChunk).toBe(drops[i - 1]!.toChunk + 1);
      expect(drops[i]!.offset).toBe(drops[i - 1]!.offset + drops[i - 1]!.bytes);
    }
    const row = store.get(s)!;
    expect(row.pty_bytes).toBe(stored(s));
    expect(row.pty_dropped + row.pty_bytes).toBe(200_000);
    expect(store.chunk(s, 199)).toEqual(kb);

    // Reading a dropped chunk is a clear 404 naming the drop, never a 500; a chunk that never was stays a plain 404.
    const gone = await call("GET", `/v1/sessions/${s}/output/0`, "carol");
    expect(gone.status).toBe(404);
    expect(gone.body.error).toMatchObject({ code: "not_found", data: { dropped: true } });
    expect(gone.body.error.message).toContain("was dropped");
    const never = await call("GET", `/v1/sessions/${s}/output/500`, "carol");
    expect(never.status).toBe(404);
    expect(never.body.error.data).toBeUndefined();
    const kept = await app.handle(
      new Request(`http://hutch/v1/sessions/${s}/output/199`, { headers: { "x-test-user": "carol", "x-hutch-client": "cli" } }),
    );
    expect(kept.status).toBe(200);
    expect((await kept.bytes()).length).toBe(1000);
  });

  test("a box's and a user's totals hold across sessions; the biggest session gives its bytes up first", () => {
    const caps = { session: 0, box: 20_000, user: 30_000 };
    const quiet = seed("dave", "box_capbox");
    const loud = seed("dave", "box_capbox");
    for (let i = 0; i < 5; i++) store.addChunk(quiet, kb);
    for (let i = 0; i < 100; i++) {
      store.addChunk(loud, kb);
      store.trimChunks(loud, caps);
      expect(stored(quiet) + stored(loud)).toBeLessThanOrEqual(20_000);
    }
    // The flood paid for itself: the quiet session's history is whole.
    expect(stored(quiet)).toBe(5000);

    // The same user's session on another box: the user's total holds across both boxes.
    const other = seed("dave", "box_capuser");
    const drops = [];
    for (let i = 0; i < 100; i++) {
      store.addChunk(other, kb);
      drops.push(...store.trimChunks(other, caps));
      expect(stored(quiet) + stored(loud) + stored(other)).toBeLessThanOrEqual(30_000);
    }
    expect(drops.some((d) => d.cap === "user")).toBe(true);
    // Another user's output is not theirs to pay for.
    const bystander = seed("erin", "box_capuser");
    store.addChunk(bystander, kb);
    store.trimChunks(bystander, caps);
    expect(stored(bystander)).toBe(1000);
  });
});
