// Approvals through a serving daemon (--remote): a token's user decides only
// what they may drive. The box's owner and a user it is shared with to drive
// decide; a read-only share sees the approval and is refused; anyone else is
// answered as for a missing id; a read-only token cannot decide at all.
import { afterAll, expect, test } from "bun:test";
import type { Principal } from "../src/auth/service.ts";
import { ask, seedSession, testApp } from "./app-helpers.ts";
import { digestOf } from "../src/approval/service.ts";

const { app, services, close } = await testApp("hutch-apr-remote-", { server: true });
const { approvals, sessionStore: store } = services;
for (const u of ["alice", "bob", "carol", "dave"]) services.auth.store.addUser(u);
afterAll(async () => {
  approvals.stop();
  for (const b of services.boxes.list()) await services.boxes.delete(b.id, null).catch(() => undefined);
  await services.boxes.close();
  close();
});

let tokens = 0;
const as = (user: string, scopes: Principal["scopes"] = ["read", "write"]): Principal => ({
  user,
  scopes,
  remote: true,
  token: `tok_${String(++tokens).padStart(12, "0")}`,
});
const call = (method: string, path: string, who: Principal, body?: unknown) => ask(app, method, path, { body, who });

test("who may decide a remote box's approval", async () => {
  const alice = as("alice");
  const made = await call("POST", "/v1/boxes", alice, { name: "shared-box" });
  expect(made.status, made.text).toBe(201);
  const boxId = made.body.id as string;
  expect((await call("PUT", "/v1/boxes/shared-box/shares", alice, { user: "bob", mode: "drive" })).status).toBe(200);
  expect((await call("PUT", "/v1/boxes/shared-box/shares", alice, { user: "carol", mode: "read" })).status).toBe(200);
  seedSession(store, { owner: "alice", box: boxId });
  const first = approvals.ask({ kind: "credential", boxId, summary: "POST /repos/o/r/issues", digest: digestOf(["one"]) });
  const second = approvals.ask({ kind: "credential", boxId, summary: "DELETE /repos/o/r", digest: digestOf(["two"]) });

  // dave has nothing of the box: not listed, and deciding is a 404 as for a missing id.
  expect((await call("GET", "/v1/approvals", as("dave"))).body).toEqual([]);
  expect((await call("POST", `/v1/approvals/${first.id}`, as("dave"), { decision: "allow_once" })).status).toBe(404);
  // carol may watch: she sees both, and may not decide.
  expect((await call("GET", "/v1/approvals", as("carol"))).body.map((a: { id: string }) => a.id)).toEqual([first.id, second.id]);
  const carol = await call("POST", `/v1/approvals/${first.id}`, as("carol"), { decision: "allow_once" });
  expect(carol.status).toBe(403);
  // A read-only token of the owner herself cannot decide either.
  const readOnly = await call("POST", `/v1/approvals/${first.id}`, as("alice", ["read"]), { decision: "allow_once" });
  expect(readOnly.status).toBe(403);
  expect(readOnly.body.error.message).toContain("read-only");
  // bob drives the box: his answer is taken, stamped with him.
  const bob = await call("POST", `/v1/approvals/${first.id}`, as("bob"), { decision: "reject_once", reason: "wrong repo" });
  expect(bob.status, bob.text).toBe(200);
  expect(await first.answer).toMatchObject({ decision: "reject_once", by: { kind: "user", id: "bob" }, reason: "wrong repo" });
  // The owner decides the other.
  expect((await call("POST", `/v1/approvals/${second.id}`, alice, { decision: "allow_once" })).status).toBe(200);
  expect((await second.answer).by).toEqual({ kind: "user", id: "alice" });
});
