// Approvals in-process: the one implementation every source uses (ask, wait,
// decide or expire, used once, bound to its digest), its routes, who may
// decide, and that the session log is the record a restarted daemon reads.
import { afterAll, describe, expect, test } from "bun:test";
import { Events, read, type Actor } from "@hutch/shared";
import { ask, seedSession, testApp } from "./app-helpers.ts";
import { ApprovalService, digestOf, MAX_PENDING_PER_BOX } from "../src/approval/service.ts";

const { app, services, close } = await testApp("hutch-apr-", { identify: (req) => req.headers.get("x-test-user") ?? "alice" });
const { sessions, sessionStore: store, approvals } = services;
afterAll(() => {
  approvals.stop();
  close();
});
// alice owns every box; carol may watch box_shared, not drive it; nobody else is shared anything.
sessions.boxAccess = (boxId, user) => (user === "alice" ? "own" : boxId === "box_shared" && user === "carol" ? "read" : null);

const call = (method: string, path: string, user = "alice", body?: unknown) =>
  ask(app, method, path, { body, headers: { "x-test-user": user } });

const logOf = (session: string) =>
  store
    .readText(session, 1, 1000)
    .text.split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { seq: number; kind: string; actor: Actor; data: Record<string, unknown> });

const digest = (s: string) => digestOf(["test", s]);

describe("asking and answering", () => {
  test("a request is logged once in the box's newest open session, listed, and a driver's approval answers the waiter", async () => {
    const box = "box_a";
    seedSession(store, { owner: "alice", box });
    const newest = seedSession(store, { owner: "alice", box });
    const { id, answer } = approvals.ask({ kind: "credential", boxId: box, summary: "POST /repos/o/r/issues", digest: digest("one") });
    const listed = await call("GET", "/v1/approvals");
    expect(listed.status).toBe(200);
    expect(listed.body.map((a: { id: string }) => a.id)).toContain(id);
    expect(listed.body.find((a: { id: string }) => a.id === id)).toMatchObject({ session: newest, state: "pending", kind: "credential" });
    const decided = await call("POST", `/v1/approvals/${id}`, "alice", { decision: "allow_once", reason: "looks right" });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ state: "allow_once", decidedBy: { kind: "user", id: "alice" } });
    expect(await answer).toEqual({ id, decision: "allow_once", by: { kind: "user", id: "alice" }, reason: "looks right" });
    const events = logOf(newest).filter((e) => e.kind.startsWith("approval."));
    expect(events.map((e) => [e.kind, e.actor.id])).toEqual([
      ["approval.requested", "hutchd"],
      ["approval.decided", "alice"],
    ]);
    expect(events[1]!.data).toMatchObject({ id, decision: "allow_once", digest: digest("one") });
    // Decided: no longer pending, and a second answer is refused.
    expect((await call("GET", "/v1/approvals")).body.map((a: { id: string }) => a.id)).not.toContain(id);
    expect((await call("POST", `/v1/approvals/${id}`, "alice", { decision: "reject_once" })).status).toBe(409);
  });

  test("deny carries its reason to the waiter", async () => {
    seedSession(store, { owner: "alice", box: "box_b" });
    const { id, answer } = approvals.ask({ kind: "egress", boxId: "box_b", summary: "CONNECT x:443", digest: digest("b") });
    expect((await call("POST", `/v1/approvals/${id}`, "alice", { decision: "reject_once", reason: "not that one" })).status).toBe(200);
    expect(await answer).toEqual({ id, decision: "reject_once", by: { kind: "user", id: "alice" }, reason: "not that one" });
  });

  test("another user neither sees nor decides it; a read-only share sees it and may not decide", async () => {
    const s = seedSession(store, { owner: "alice", box: "box_shared" });
    const { id } = approvals.ask({ kind: "credential", boxId: "box_shared", summary: "DELETE /x", digest: digest("shared") });
    expect((await call("GET", "/v1/approvals", "bob")).body.map((a: { id: string }) => a.id)).not.toContain(id);
    expect((await call("POST", `/v1/approvals/${id}`, "bob", { decision: "allow_once" })).status).toBe(404);
    expect((await call("GET", "/v1/approvals", "carol")).body.map((a: { id: string }) => a.id)).toContain(id);
    const carol = await call("POST", `/v1/approvals/${id}`, "carol", { decision: "allow_once" });
    expect(carol.status).toBe(403);
    expect(carol.body.error.message).toContain("read-only");
    expect(approvals.get(id, { kind: "user", id: "alice" }).state).toBe("pending");
    expect(logOf(s).filter((e) => e.kind === "approval.decided")).toEqual([]);
  });

  test("a decision through the box's own connection is refused and logged, and the approval stays pending", () => {
    const s = seedSession(store, { owner: "alice", box: "box_self" });
    const { id } = approvals.ask({ kind: "credential", boxId: "box_self", summary: "POST /x", digest: digest("self") });
    const agent: Actor = { kind: "agent", id: "alice/agent:claude" };
    expect(() => approvals.decide(id, "allow_always", agent, { via: "box", boxId: "box_self" })).toThrow(
      /a box cannot decide its own approvals/,
    );
    expect(approvals.get(id, agent).state).toBe("pending");
    const refused = logOf(s).filter((e) => e.kind === "approval.refused");
    expect(refused.map((e) => [e.actor.id, e.data.id])).toEqual([["alice/agent:claude", id]]);
  });

  test("an unanswered approval expires: the waiter hears expired, logged by the daemon", async () => {
    const s = seedSession(store, { owner: "alice", box: "box_exp" });
    approvals.ttlOf = (b) => (b === "box_exp" ? 30 : undefined);
    try {
      const { id, answer } = approvals.ask({ kind: "egress", boxId: "box_exp", summary: "CONNECT y:443", digest: digest("exp") });
      expect((await answer).decision).toBe("expired");
      const decided = logOf(s).filter((e) => e.kind === "approval.decided");
      expect(decided.map((e) => [e.actor.kind, e.data.decision, e.data.id])).toEqual([["system", "expired", id]]);
    } finally {
      approvals.ttlOf = () => undefined;
    }
  });

  test("a box with no open session cannot be asked for: a named error, nothing logged", () => {
    expect(() => approvals.ask({ kind: "egress", boxId: "box_nobody", summary: "x", digest: digest("x") })).toThrow(/no open session/);
  });

  test("a box has at most MAX_PENDING_PER_BOX approvals waiting; another box is still asked for", async () => {
    const s = seedSession(store, { owner: "alice", box: "box_flood" });
    seedSession(store, { owner: "alice", box: "box_calm" });
    for (let i = 0; i < MAX_PENDING_PER_BOX; i++)
      approvals.ask({ kind: "credential", boxId: "box_flood", summary: `POST /x/${i}`, digest: digest(`flood${i}`) });
    expect(() => approvals.ask({ kind: "credential", boxId: "box_flood", summary: "one more", digest: digest("more") })).toThrow(
      /approvals waiting for a person, its most/,
    );
    expect(logOf(s).filter((e) => e.kind === "approval.requested").length).toBe(MAX_PENDING_PER_BOX);
    expect(approvals.ask({ kind: "credential", boxId: "box_calm", summary: "calm", digest: digest("calm") }).id).toStartWith("apr_");
  });

  test("bad input is named: an unknown decision, a malformed id", async () => {
    const bad = await call("POST", "/v1/approvals/apr_00000000000000000000", "alice", { decision: "maybe" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain("decision");
    expect((await call("POST", "/v1/approvals/nope", "alice", { decision: "allow_once" })).status).toBe(400);
    expect((await call("POST", "/v1/approvals/apr_00000000000000000000", "alice", { decision: "allow_once" })).status).toBe(404);
  });
});

describe("grants are bound to their digest and used once", () => {
  test("allow_once is taken by one request with the same digest, never by a different one", async () => {
    seedSession(store, { owner: "alice", box: "box_take" });
    const { id } = approvals.ask({ kind: "credential", boxId: "box_take", summary: "POST /x", digest: digest("take") });
    expect(approvals.take("box_take", digest("take"))).toBeNull();
    await call("POST", `/v1/approvals/${id}`, "alice", { decision: "allow_once" });
    expect(() => approvals.take("box_take", digest("other"), id)).toThrow(/differs from what approval/);
    expect(approvals.take("box_take", digest("other"))).toBeNull();
    expect(approvals.take("box_other", digest("take"))).toBeNull();
    expect(approvals.take("box_take", digest("take"), id)).toEqual({ id, allow: true });
    expect(approvals.take("box_take", digest("take"))).toBeNull();
    expect(() => approvals.take("box_take", digest("take"), id)).toThrow(/used already/);
  });

  test("allow_always keeps answering its digest; reject_always refuses it without asking", async () => {
    seedSession(store, { owner: "alice", box: "box_always" });
    const yes = approvals.ask({ kind: "credential", boxId: "box_always", summary: "a", digest: digest("yes") });
    const no = approvals.ask({ kind: "credential", boxId: "box_always", summary: "b", digest: digest("no") });
    await call("POST", `/v1/approvals/${yes.id}`, "alice", { decision: "allow_always" });
    await call("POST", `/v1/approvals/${no.id}`, "alice", { decision: "reject_always" });
    expect(approvals.take("box_always", digest("yes"))).toEqual({ id: yes.id, allow: true });
    expect(approvals.take("box_always", digest("yes"))).toEqual({ id: yes.id, allow: true });
    expect(approvals.take("box_always", digest("no"))).toEqual({ id: no.id, allow: false });
  });
});

describe("the session log is the record", () => {
  test("a restarted daemon finds the pending approval, which can still be decided, exactly once", async () => {
    const s = seedSession(store, { owner: "alice", box: "box_restart" });
    const { id } = approvals.ask({ kind: "credential", boxId: "box_restart", summary: "POST /y", digest: digest("restart") });
    const gone = approvals.ask({ kind: "credential", boxId: "box_restart", summary: "POST /z", digest: digest("gone") });
    await call("POST", `/v1/approvals/${gone.id}`, "alice", { decision: "reject_once" });
    // A second service over the same log: what a daemon started after a SIGKILL builds.
    const again = new ApprovalService(sessions, store);
    try {
      again.recover();
      const alice: Actor = { kind: "user", id: "alice" };
      expect(again.list(alice, { box: "box_restart" }).map((a) => a.id)).toEqual([id]);
      expect(again.list(alice).map((a) => a.id)).toContain(id);
      expect(again.list(alice).map((a) => a.id)).not.toContain(gone.id);
      expect(again.get(gone.id, alice)).toMatchObject({ state: "reject_once", decidedBy: alice });
      again.decide(id, "allow_once", alice, { via: "api" });
      expect(again.take("box_restart", digest("restart"))).toEqual({ id, allow: true });
      const decided = logOf(s)
        .filter((e) => e.kind === "approval.decided")
        .map((e) => read(e, Events.approvalDecided)!.id);
      expect(decided.sort()).toEqual([gone.id, id].sort());
    } finally {
      again.stop();
    }
  });

  test("one whose time ran out while the daemon was down is logged expired once, at start", () => {
    const s = seedSession(store, { owner: "alice", box: "box_late" });
    const { id } = approvals.ask({ kind: "egress", boxId: "box_late", summary: "CONNECT z:443", digest: digest("late") });
    const later = Date.now() + 11 * 60_000;
    const again = new ApprovalService(sessions, store);
    try {
      again.recover(later);
      const third = new ApprovalService(sessions, store);
      third.recover(later);
      third.stop();
      const decided = logOf(s).filter((e) => e.kind === "approval.decided");
      expect(decided.map((e) => [e.data.id, e.data.decision, e.actor.kind])).toEqual([[id, "expired", "system"]]);
    } finally {
      again.stop();
    }
  });
});
