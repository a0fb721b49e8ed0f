// Server mode's gates in-process, through app.handle with a principal stamped
// as the TCP listener stamps it, over real sqlite and the process engine: the
// per-token creation limit holds on every route that makes a box, an
// idempotency key is its user's, the change feed tells a removal only to who
// could see the box, and health tells a remote caller no paths or pids.
import { afterAll, describe, expect, test } from "bun:test";
import { setPrincipal } from "../src/daemon/actor.ts";
import { ask, req, type RequestOptions, testApp } from "./app-helpers.ts";
import { CreationGate } from "../src/daemon/creations.ts";
import { CreateLimiter } from "../src/auth/limit.ts";
import type { Principal } from "../src/auth/service.ts";

// Two creations a token, and (for the length of a test) none back.
const limiter = new CreateLimiter(2, 1e-6);
const { home, app, services, close } = await testApp("hutch-gates-", { server: true, creations: new CreationGate(limiter) });
services.auth.store.addUser("alice");
services.auth.store.addUser("bob");
afterAll(async () => {
  for (const b of services.boxes.list()) await services.boxes.delete(b.id, null).catch(() => undefined);
  await services.boxes.close();
  close();
});

let tokens = 0;
/** A principal with a token of its own (so a full bucket of one test is not another's). */
const as = (user: string, scopes: Principal["scopes"] = ["read", "write"]): Principal => ({
  user,
  scopes,
  remote: true,
  token: `tok_${String(++tokens).padStart(12, "0")}`,
});

const opts = (who?: Principal, body?: unknown, key?: string): RequestOptions => ({
  body,
  who,
  headers: key ? { "idempotency-key": key } : {},
});
const send = (method: string, path: string, who?: Principal, body?: unknown, key?: string) =>
  app.handle(req(method, path, opts(who, body, key)));
const call = (method: string, path: string, who?: Principal, body?: unknown, key?: string) => ask(app, method, path, opts(who, body, key));

let names = 0;
const fresh = (stem: string) => `${stem}-${++names}`;

describe("the creation limit holds on every route that makes a box", () => {
  test("POST /v1/boxes: two, then 429 naming when to retry", async () => {
    const p = as("alice");
    expect((await call("POST", "/v1/boxes", p, { name: fresh("lim") })).status).toBe(201);
    expect((await call("POST", "/v1/boxes", p, { name: fresh("lim") })).status).toBe(201);
    const r = await call("POST", "/v1/boxes", p, { name: fresh("lim") });
    expect(r.status).toBe(429);
    expect(r.body.error).toMatchObject({ code: "limited", hint: expect.stringMatching(/^retry in \d+ s$/) });
    // Another token of the same user has its own bucket.
    expect((await call("POST", "/v1/boxes", as("alice"), { name: fresh("lim") })).status).toBe(201);
  });

  test("POST /v1/sessions: a session on a new box pays for the box; one on a box of yours does not", async () => {
    const p = as("alice");
    const box = fresh("ses");
    expect((await call("POST", "/v1/boxes", p, { name: box, start: true })).status).toBe(201);
    // On a box named: nothing is made, nothing is taken (three of them, with one creation left).
    for (let i = 0; i < 3; i++) expect((await call("POST", "/v1/sessions", p, { box })).status).toBe(201);
    expect((await call("POST", "/v1/sessions", p, {})).status).toBe(201);
    const before = services.boxes.list().length;
    const r = await call("POST", "/v1/sessions", p, {});
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe("limited");
    expect(services.boxes.list().length).toBe(before);
  }, 60_000);

  test("POST /v1/sessions/:id/fork: a fork pays for its box", async () => {
    const p = as("alice");
    const box = fresh("frk");
    expect((await call("POST", "/v1/boxes", p, { name: box, start: true })).status).toBe(201);
    const ses = await call("POST", "/v1/sessions", p, { box });
    await services.snapshots.create(box, "base", () => undefined, AbortSignal.timeout(30_000));
    const at = services.sessionStore.last(ses.body.id);
    expect((await call("POST", `/v1/sessions/${ses.body.id}/fork`, p, { at })).status).toBe(201);
    const r = await call("POST", `/v1/sessions/${ses.body.id}/fork`, p, { at });
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe("limited");
  }, 60_000);

  test("POST /v1/doctor: a run pays for its throwaway box (one per engine) before it starts, and no more", async () => {
    const p = as("alice");
    const doctor = async () => {
      const res = await send("POST", "/v1/doctor", p);
      return { status: res.status, text: await res.text() };
    };
    const ran = await doctor();
    expect(ran.status).toBe(200);
    expect(ran.text).toContain('"type":"result"');
    expect(ran.text).toContain("started a box");
    // Nothing of the server's paths or pid for a remote caller (as /v1/health).
    expect(ran.text.includes(home)).toBe(false);
    expect(ran.text.includes(`pid ${process.pid}`)).toBe(false);
    // One left: the run's box was charged once, up front.
    expect((await call("POST", "/v1/boxes", p, { name: fresh("doc") })).status).toBe(201);
    const r = await doctor();
    expect(r.status).toBe(429);
    expect(JSON.parse(r.text).error.code).toBe("limited");
  }, 60_000);

  test("POST /v1/dispatches: k workers take k, all or none, before it starts", async () => {
    const admin = as("alice", ["read", "write", "admin"]);
    const base = fresh("dsp");
    expect((await call("POST", "/v1/boxes", admin, { name: base, start: true })).status).toBe(201);
    const snap = await services.snapshots.create(base, "base", () => undefined, AbortSignal.timeout(30_000));
    const body = (k: number) => ({ from: snap.snapshot.id, k, agents: ["shell"], task: "t", check: "true" });
    // One creation left: two workers are refused whole, and take nothing.
    const r = await call("POST", "/v1/dispatches", admin, body(2));
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe("limited");
    const one = await call("POST", "/v1/dispatches", admin, body(1));
    expect(one.status, one.text).toBe(201);
    expect((await call("POST", `/v1/dispatches/${one.body.id}/cancel`, admin)).status).toBe(200);
    // The one worker took the last creation; its own boxes (worker, grader) were paid for with it.
    expect((await call("POST", "/v1/boxes", admin, { name: fresh("dsp") })).status).toBe(429);
  }, 60_000);

  test("the local socket is not limited", async () => {
    for (let i = 0; i < 3; i++) expect((await call("POST", "/v1/boxes", undefined, { name: fresh("loc") })).status).toBe(201);
  });
});

describe("an idempotency key is its user's", () => {
  test("bob replaying alice's key on a create makes his own box and sees nothing of hers", async () => {
    const key = crypto.randomUUID();
    const mine = fresh("idem-a");
    const a = await call("POST", "/v1/boxes", as("alice"), { name: mine }, key);
    expect(a.status).toBe(201);
    const again = await call("POST", "/v1/boxes", as("alice"), { name: mine }, key);
    expect(again.body.id).toBe(a.body.id);
    const theirs = fresh("idem-b");
    const b = await call("POST", "/v1/boxes", as("bob"), { name: theirs }, key);
    expect(b.status).toBe(201);
    expect(b.body.name).toBe(theirs);
    expect(b.text.includes(a.body.id)).toBe(false);
    expect(b.text.includes(mine)).toBe(false);
    expect(services.auth.owner(b.body.id)).toBe("bob");
  });

  test("bob replaying alice's key on a lifecycle verb acts on his box, not an answer about hers", async () => {
    const key = crypto.randomUUID();
    const mine = fresh("idem-a");
    const theirs = fresh("idem-b");
    expect((await call("POST", "/v1/boxes", as("alice"), { name: mine })).status).toBe(201);
    expect((await call("POST", "/v1/boxes", as("bob"), { name: theirs })).status).toBe(201);
    expect((await call("POST", `/v1/boxes/${mine}/start`, as("alice"), undefined, key)).body.name).toBe(mine);
    const b = await call("POST", `/v1/boxes/${theirs}/start`, as("bob"), undefined, key);
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ name: theirs, state: "running" });
    expect(b.text.includes(mine)).toBe(false);
  }, 60_000);
});

/** Reads a change feed's lines until stop() says it has what it waited for, or 10 s pass. */
async function feed(who: Principal, until: (lines: { type: string; id?: string }[]) => boolean, during: () => Promise<void>) {
  const abort = new AbortController();
  const request = new Request("http://hutch/v1/changes", { signal: abort.signal });
  setPrincipal(request, who);
  const res = await app.handle(request);
  const reader = res.body!.getReader();
  const lines: { type: string; id?: string }[] = [];
  const dec = new TextDecoder();
  let buf = "";
  const reading = (async () => {
    const deadline = Date.now() + 10_000;
    while (!until(lines) && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        lines.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
        nl = buf.indexOf("\n");
      }
    }
  })();
  await during();
  await Promise.race([reading, Bun.sleep(10_000)]);
  abort.abort();
  await reader.cancel().catch(() => undefined);
  return lines;
}

describe("the change feed", () => {
  test("a removal reaches who could see the box: bob hears of the one shared with him, not of alice's own", async () => {
    const alice = as("alice");
    const priv = fresh("priv");
    const shared = fresh("shared");
    const p = await call("POST", "/v1/boxes", alice, { name: priv });
    const s = await call("POST", "/v1/boxes", alice, { name: shared });
    expect((await call("PUT", `/v1/boxes/${shared}/shares`, alice, { user: "bob", mode: "read" })).status).toBe(200);
    const removed = (lines: { type: string; id?: string }[]) => lines.filter((l) => l.type === "box.removed").map((l) => l.id);
    const seen = await feed(
      as("bob"),
      (lines) => removed(lines).includes(s.body.id),
      async () => {
        // The private one goes first: by the time bob hears of the shared one, he would have heard of it.
        expect((await call("DELETE", `/v1/boxes/${priv}`, alice)).status).toBe(200);
        expect((await call("DELETE", `/v1/boxes/${shared}`, alice)).status).toBe(200);
      },
    );
    expect(removed(seen)).toEqual([s.body.id]);
    expect(JSON.stringify(seen).includes(p.body.id)).toBe(false);
    expect(JSON.stringify(seen).includes(priv)).toBe(false);
  });

  test("the owner hears of her own box's removal", async () => {
    const alice = as("alice");
    const name = fresh("own");
    const b = await call("POST", "/v1/boxes", alice, { name });
    const seen = await feed(
      alice,
      (lines) => lines.some((l) => l.type === "box.removed"),
      async () => {
        expect((await call("DELETE", `/v1/boxes/${name}`, alice)).status).toBe(200);
      },
    );
    expect(seen.filter((l) => l.type === "box.removed").map((l) => l.id)).toEqual([b.body.id]);
  });
});

describe("health", () => {
  test("a remote caller gets ok and the version, nothing of the server's paths or pid; the local socket gets both", async () => {
    const remote = await call("GET", "/v1/health", as("bob", ["read"]));
    expect(remote.status).toBe(200);
    expect(Object.keys(remote.body).sort()).toEqual(["ok", "version"]);
    expect(remote.text.includes(home)).toBe(false);
    const local = await call("GET", "/v1/health");
    expect(local.body).toMatchObject({ ok: true, pid: process.pid, home });
  });
});
