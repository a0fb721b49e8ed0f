// Session summaries in-process: folded as events are stored, in the same
// transaction, persisted, built once for a session from before they were
// kept, bounded, and served by the sessions API to who may see the session.
import { afterAll, describe, expect, test } from "bun:test";
import { Events, SUMMARY_ANCHORS, type Actor, type SessionSummary } from "@hutch/shared";
import { ask, seedSession, testApp } from "./app-helpers.ts";
import type { NewEvent } from "../src/store/types.ts";
import { FIXTURE_AGENT, FIXTURE_USER, fixtureEvent } from "../../tests/fixtures/events.ts";

const { db, app, services, close } = await testApp("hutch-sum-", { identify: (req) => req.headers.get("x-test-user") ?? "alice" });
const { sessions, sessionStore: store } = services;
afterAll(close);

const alice: Actor = FIXTURE_USER;
const agent: Actor = FIXTURE_AGENT;

/** A session row without a terminal; `created` logs session.created the way SessionService.create does. */
function seed(created = true): string {
  const id = seedSession(store, { agent: "claude" });
  if (created) sessions.append(id, [{ ...fixtureEvent(Events.sessionCreated, { box: "box_none", agent: "claude" }), actor: alice }]);
  return id;
}

const turnLog = (): NewEvent[] => [
  { ...fixtureEvent(Events.inputSent, { text: "fix it" }), actor: alice },
  { ...fixtureEvent(Events.agentState, { state: "busy" }), actor: agent },
  { ...fixtureEvent(Events.annotationAdded, { text: "this loop", anchor: { path: "src/a.ts", line: 3 } }), actor: agent },
  { ...fixtureEvent(Events.annotationAdded, { text: "no anchor" }), actor: alice },
  { ...fixtureEvent(Events.annotationAdded, { text: "a file, no line", anchor: { path: "src/b.ts" } }), actor: alice },
  { ...fixtureEvent(Events.agentState, { state: "error", reason: "the model refused" }), actor: agent },
  { ...fixtureEvent(Events.attentionRequired, { reason: "the model refused" }), actor: agent },
];

const get = (path: string, user = "alice") => ask(app, "GET", path, { headers: { "x-test-user": user } });

describe("session summaries", () => {
  test("are folded as events are stored and served with the session", async () => {
    const id = seed();
    sessions.append(id, turnLog());
    const r = await get(`/v1/sessions/${id}/summary`);
    expect(r.status).toBe(200);
    const s = r.body as SessionSummary;
    expect(s.session).toMatchObject({ id, lastSeq: 8, state: "open" });
    expect(s.activity).toBe("error");
    expect(s.turn).toEqual({
      input: 2,
      attention: 8,
      started: 0,
      exited: 0,
      closed: 0,
      agent: { seq: 7, state: "error", reason: "the model refused" },
    });
    expect(s.anchors).toEqual([{ seq: 4, at: expect.any(String), actor: agent, text: "this loop", anchor: { path: "src/a.ts", line: 3 } }]);
  });

  test("name the session by its first prompt or command, once its line has ended", async () => {
    const id = seed();
    const typed = (...keys: string[]) =>
      sessions.append(
        id,
        keys.map((text) => ({ ...fixtureEvent(Events.inputSent, { text }), actor: alice })),
      );
    typed("m", "a", "k");
    expect(((await get(`/v1/sessions/${id}/summary`)).body as SessionSummary).first).toBeUndefined();
    typed("e", "\r", "l", "s", "\r");
    expect(((await get(`/v1/sessions/${id}/summary`)).body as SessionSummary).first).toBe("make");
    const list = (await get("/v1/summaries")).body as SessionSummary[];
    expect(list.find((x) => x.session.id === id)?.first).toBe("make");
    const prompt = seed();
    sessions.append(prompt, turnLog());
    expect(((await get(`/v1/sessions/${prompt}/summary`)).body as SessionSummary).first).toBe("fix it");
  });

  test("are persisted with their events, not recomputed from the log when read", async () => {
    const id = seed();
    sessions.append(id, turnLog());
    const before = (await get(`/v1/sessions/${id}/summary`)).body as SessionSummary;
    expect(store.summaries.turn(id)).toEqual(before.turn);
    // With the log gone, a summary that were folded per request would read as a fresh session.
    db.query("DELETE FROM events WHERE session_id = ?").run(id);
    const after = (await get(`/v1/sessions/${id}/summary`)).body as SessionSummary;
    expect(after.turn).toEqual(before.turn);
    expect(after.activity).toBe("error");
  });

  test("a batch that fails leaves the summary as it was", async () => {
    const id = seed();
    sessions.append(id, turnLog());
    const before = store.summaries.turn(id);
    // Straight to the store, past the service's check: a BigInt makes JSON.stringify throw after the
    // first event of the batch was stored and folded, inside the one transaction.
    const input = { ...fixtureEvent(Events.inputSent, { text: "again" }), actor: alice };
    expect(() => store.append(id, [input, { kind: "annotation.added", data: { n: 1n } as never, actor: alice }])).toThrow();
    expect(store.summaries.turn(id)).toEqual(before);
    expect(((await get(`/v1/sessions/${id}/summary`)).body as SessionSummary).activity).toBe("error");
  });

  test("a session stored before summaries were kept gets its summary built once from its log", async () => {
    const kept = seed();
    sessions.append(kept, turnLog());
    const want = (await get(`/v1/sessions/${kept}/summary`)).body as SessionSummary;
    const old = seed();
    sessions.append(old, turnLog());
    db.query("DELETE FROM session_turns WHERE session_id = ?").run(old);
    db.query("DELETE FROM session_anchors WHERE session_id = ?").run(old);
    expect(store.summaries.turn(old)).toBeNull();
    const built = (await get(`/v1/sessions/${old}/summary`)).body as SessionSummary;
    expect(built.turn).toEqual(want.turn);
    expect(built.anchors.map((a) => a.seq)).toEqual(want.anchors.map((a) => a.seq));
    expect(store.summaries.turn(old)).toEqual(want.turn);
    // A new event folds onto the built summary.
    sessions.append(old, [{ ...fixtureEvent(Events.inputSent, { text: "try again" }), actor: alice }]);
    expect(((await get(`/v1/sessions/${old}/summary`)).body as SessionSummary).activity).toBe("idle");
  });

  test("hold the latest anchored annotations, at most SUMMARY_ANCHORS", async () => {
    const id = seed();
    const extra = 5;
    sessions.append(
      id,
      Array.from({ length: SUMMARY_ANCHORS + extra }, (_, i) => ({
        ...fixtureEvent(Events.annotationAdded, { text: `n${i}`, anchor: { path: "a.ts", line: 1 + (i % 50) } }),
        actor: alice,
      })),
    );
    const s = (await get(`/v1/sessions/${id}/summary`)).body as SessionSummary;
    expect(s.anchors).toHaveLength(SUMMARY_ANCHORS);
    expect(s.anchors[0]!.text).toBe(`n${extra}`);
    expect(s.anchors.at(-1)!.seq).toBe(s.session.lastSeq);
  });

  test("GET /v1/summaries lists what GET /v1/sessions lists, and only what the user may see", async () => {
    const mine = seed();
    const theirs = seedSession(store, { owner: "bob" });
    const listed = (await get("/v1/sessions")).body as { id: string }[];
    const summaries = (await get("/v1/summaries")).body as SessionSummary[];
    expect(summaries.map((s) => s.session.id)).toEqual(listed.map((s) => s.id));
    expect(summaries.map((s) => s.session.id)).toContain(mine);
    expect(summaries.map((s) => s.session.id)).not.toContain(theirs);
    expect((await get(`/v1/sessions/${theirs}/summary`)).status).toBe(404);
    expect(((await get(`/v1/summaries`, "bob")).body as SessionSummary[]).map((s) => s.session.id)).toEqual([theirs]);
  });
});
