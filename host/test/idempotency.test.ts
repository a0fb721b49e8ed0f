// Idempotency keys travel one way, the Idempotency-Key header, on every route
// that takes one: a repeat returns the first answer and stores nothing new; a
// key in the body is refused, naming the field; a malformed header is a 400.
import { afterAll, describe, expect, test } from "bun:test";
import { ask, seedSession, testApp } from "./app-helpers.ts";

const { app, services, close } = await testApp("hutch-idem-", { identify: () => "alice" });
const { boxes, sessionStore: store } = services;
afterAll(close);

const seed = () => seedSession(store);

const call = (method: string, path: string, body: unknown, key?: string) =>
  ask(app, method, path, { body, headers: key === undefined ? {} : { "idempotency-key": key } });

const annotations = (sid: string) => store.readText(sid, 1, 100).text.split("\n").filter(Boolean).length;

describe("the Idempotency-Key header", () => {
  test("annotations: a repeat returns the first seq and stores nothing", async () => {
    const sid = seed();
    const a = await call("POST", `/v1/sessions/${sid}/annotations`, { text: "once" }, "k-ann");
    const b = await call("POST", `/v1/sessions/${sid}/annotations`, { text: "once" }, "k-ann");
    expect(a.status).toBe(200);
    expect(b.body.seq).toBe(a.body.seq);
    expect(annotations(sid)).toBe(1);
    const c = await call("POST", `/v1/sessions/${sid}/annotations`, { text: "again" }, "k-other");
    expect(c.body.seq).toBe(a.body.seq + 1);
  });

  test("events: one key for the request; a repeat of a batch returns every first seq", async () => {
    const sid = seed();
    const events = [
      { kind: "annotation.added", data: { text: "a" } },
      { kind: "annotation.added", data: { text: "b" } },
    ];
    const a = await call("POST", `/v1/sessions/${sid}/events`, { events }, "k-batch");
    const b = await call("POST", `/v1/sessions/${sid}/events`, { events }, "k-batch");
    expect(a.body.seqs).toEqual([1, 2]);
    expect(b.body.seqs).toEqual([1, 2]);
    expect(annotations(sid)).toBe(2);
    // Without a key, every request is new.
    await call("POST", `/v1/sessions/${sid}/events`, { events: events.slice(0, 1) });
    await call("POST", `/v1/sessions/${sid}/events`, { events: events.slice(0, 1) });
    expect(annotations(sid)).toBe(4);
  });

  test("box create: a repeat returns the first box", async () => {
    const a = await call("POST", "/v1/boxes", { name: "idem-box" }, "k-box");
    const b = await call("POST", "/v1/boxes", { name: "idem-box" }, "k-box");
    expect(a.status).toBe(201);
    expect(b.body.id).toBe(a.body.id);
  });

  test("a key in the body is refused, naming the field", async () => {
    const sid = seed();
    for (const [path, body] of [
      [`/v1/sessions/${sid}/annotations`, { text: "x", idempotencyKey: "k" }],
      [`/v1/sessions/${sid}/input`, { text: "x", idempotencyKey: "k" }],
      [`/v1/sessions/${sid}/events`, { events: [{ kind: "annotation.added", data: { text: "x" }, idempotencyKey: "k" }] }],
    ] as const) {
      const r = await call("POST", path, body);
      expect(r.status, path).toBe(400);
      expect(r.body.error.message, path).toContain("idempotencyKey");
    }
    expect(annotations(sid)).toBe(0);
  });

  test("a malformed key is a 400 naming the header, on every route that takes one", async () => {
    const sid = seed();
    for (const [method, path, body] of [
      ["POST", "/v1/boxes", { name: "never" }],
      ["POST", "/v1/boxes/idem-box/start", undefined],
      ["POST", "/v1/boxes/idem-box/stop", undefined],
      ["DELETE", "/v1/boxes/idem-box", undefined],
      ["POST", `/v1/sessions/${sid}/annotations`, { text: "x" }],
      ["POST", `/v1/sessions/${sid}/input`, { text: "x" }],
      ["POST", `/v1/sessions/${sid}/events`, { events: [{ kind: "annotation.added", data: { text: "x" } }] }],
    ] as const) {
      for (const key of ["x".repeat(129), "has space"]) {
        const r = await call(method, path, body ?? {}, key);
        expect(r.status, `${method} ${path} ${key.length}`).toBe(400);
        expect(r.body.error.message).toContain("idempotency-key");
      }
    }
    expect(boxes.list().map((b) => b.name)).toEqual(["idem-box"]);
    expect(annotations(sid)).toBe(0);
  });
});
