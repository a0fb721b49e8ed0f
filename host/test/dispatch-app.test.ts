// The dispatch routes in-process (app.handle, no socket): bodies checked by
// schema before any work, unknown ids answered as missing, and a box that is
// not there refused before a dispatch is recorded; in server mode another
// user's snapshot, box and dispatches answered exactly as missing ones.
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { ask, testApp } from "./app-helpers.ts";
import type { Principal } from "../src/auth/service.ts";

// No agent CLI is fetched: a worker's agent is not installed here, and its turn ends in error at once.
process.env.HUTCH_AGENT_INSTALL = "0";
const { home, app, services, close } = await testApp("hutch-dsp-app-", { server: true });
afterAll(close);

async function call(method: string, path: string, body?: unknown, who?: Principal) {
  const r = await ask(app, method, path, { body, who });
  return { status: r.status, body: r.body as { error?: { code: string; message: string; hint?: string } } };
}

const good = { k: 2, agents: ["claude"], task: "fix it", check: "true" };

test.each([
  [{ ...good, k: 0 }, "k"],
  [{ ...good, k: 17 }, "k"],
  [{ ...good, agents: ["nope"] }, "agents"],
  [{ ...good, check: "" }, "check"],
  [{ ...good, workdir: "relative" }, "workdir"],
  [{ ...good, extra: 1 }, "extra"],
])("a bad body is refused by schema, naming the field (%j)", async (body, field) => {
  const r = await call("POST", "/v1/dispatches", { ...body, from: "snap_00000000000000000000" });
  expect(r.status).toBe(400);
  expect(r.body.error?.message).toContain(field);
});

test("neither from nor box, both, or a box that is not there: refused with the next step, and nothing recorded", async () => {
  const neither = await call("POST", "/v1/dispatches", good);
  expect(neither.status).toBe(400);
  expect(neither.body.error?.hint).toContain("--here");
  expect((await call("POST", "/v1/dispatches", { ...good, box: "src", from: "snap_00000000000000000000" })).status).toBe(400);
  const missing = await call("POST", "/v1/dispatches", { ...good, box: "nope" });
  expect(missing.status).toBe(404);
  expect(readdirSync(home)).not.toContain("dispatch");
  expect((await call("GET", "/v1/dispatches")).body as unknown).toEqual([]);
});

test("an unknown dispatch is not found, with the command that lists them", async () => {
  for (const [method, path] of [
    ["GET", "/v1/dispatches/dsp_00000000000000000000"],
    ["POST", "/v1/dispatches/dsp_00000000000000000000/cancel"],
    ["GET", "/v1/dispatches/..%2Fetc"],
  ] as const) {
    const r = await call(method, path);
    expect(r.status).toBe(404);
    expect(r.body.error?.hint).toContain("hutch dispatch list");
  }
});

describe("server mode: a dispatch is held to the rule of a fork, and is its starter's", () => {
  const MISSING = "snap_00000000000000000000";
  // Admin tokens, which may use dispatches at all; an admin token manages shares, not other users' things.
  const as = (user: string): Principal => ({ user, scopes: ["read", "write", "admin"], remote: true, token: "tok_000000000000" });
  const same = (a: unknown, aId: string, b: unknown, bId: string) =>
    expect(JSON.stringify(a).replaceAll(aId, "ID")).toBe(JSON.stringify(b).replaceAll(bId, "ID"));

  test("bob dispatching from alice's snapshot or her box is answered as if neither existed; nothing is recorded", async () => {
    await services.auth.addUser("alice");
    await services.auth.addUser("bob");
    expect((await call("POST", "/v1/boxes", { name: "aweb" }, as("alice"))).status).toBe(201);
    const snap = (await services.snapshots.create("aweb", "alice's", () => undefined, new AbortController().signal)).snapshot.id;

    const theirs = await call("POST", "/v1/dispatches", { ...good, from: snap }, as("bob"));
    const none = await call("POST", "/v1/dispatches", { ...good, from: MISSING }, as("bob"));
    expect(theirs.status).toBe(404);
    expect(none.status).toBe(404);
    same(theirs.body, snap, none.body, MISSING);
    expect(theirs.body.error?.hint).toContain("hutch snapshot list");

    const herBox = await call("POST", "/v1/dispatches", { ...good, box: "aweb" }, as("bob"));
    const noBox = await call("POST", "/v1/dispatches", { ...good, box: "nope" }, as("bob"));
    expect(herBox.status).toBe(404);
    same(herBox.body, "aweb", noBox.body, "nope");

    // Shared to drive is not enough: a dispatch copies the box (and deletes it when it owns the offload).
    await services.auth.share(services.boxes.get("aweb").id, "bob", "drive");
    const driven = await call("POST", "/v1/dispatches", { ...good, box: "aweb", ownBox: true }, as("bob"));
    expect(driven.status).toBe(403);
    expect(driven.body.error?.hint).toContain("ask its owner");
    expect(services.boxes.find("aweb")).toBeTruthy();
    expect((await call("GET", "/v1/dispatches", undefined, as("bob"))).body as unknown).toEqual([]);
  });

  test("alice's dispatch from her own snapshot starts; bob cannot see, list or cancel it (missing, as an unknown one)", async () => {
    const snap = (await services.snapshots.create("aweb", "alice's 2", () => undefined, new AbortController().signal)).snapshot.id;
    // Its worker's agent is not installed here: it ends in error, which is enough to have a dispatch of alice's on record.
    const made = await call("POST", "/v1/dispatches", { ...good, k: 1, timeout: 10, from: snap }, as("alice"));
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const id = (made.body as unknown as { id: string }).id;
    const unknown = "dsp_00000000000000000000";
    for (const [method, path] of [
      ["GET", `/v1/dispatches/${id}`],
      ["POST", `/v1/dispatches/${id}/cancel`],
    ] as const) {
      const theirs = await call(method, path, undefined, as("bob"));
      expect(theirs.status).toBe(404);
      same(theirs.body, id, (await call(method, path.replace(id, unknown), undefined, as("bob"))).body, unknown);
    }
    expect((await call("GET", "/v1/dispatches", undefined, as("bob"))).body as unknown).toEqual([]);
    expect(((await call("GET", "/v1/dispatches", undefined, as("alice"))).body as unknown as { id: string }[]).map((d) => d.id)).toEqual([
      id,
    ]);
    // Hers to cancel: it stops (or had already ended, its one worker in error) with every box it made gone.
    const cancelled = (await call("POST", `/v1/dispatches/${id}/cancel`, undefined, as("alice"))).body as unknown as {
      state: string;
      tornDown: boolean;
      workers: { boxDeleted: boolean }[];
    };
    expect(["cancelled", "done"]).toContain(cancelled.state);
    expect(cancelled.tornDown).toBe(true);
    expect(cancelled.workers.every((w) => w.boxDeleted)).toBe(true);
  }, 60_000);
});
