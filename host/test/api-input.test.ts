// Bad input in-process (app.handle, a real sqlite file): every one is a 400
// that names the field, never a 500, and nothing of it is stored.
import { afterAll, describe, expect, test } from "bun:test";
import { API_LIMITS } from "@hutch/shared";
import { ask, seedSession, testApp } from "./app-helpers.ts";

const { app, services, close } = await testApp("hutch-input-");
const store = services.sessionStore;
afterAll(close);

/** A session row without a terminal: the log rules need no running box. */
const ses = seedSession(store, { owner: "root" });
await app.handle(
  new Request("http://hutch/v1/boxes", { method: "POST", headers: { "content-type": "application/json" }, body: '{"name":"b"}' }),
);

async function call(method: string, path: string, body?: string, contentType = "application/json") {
  const r = await ask(app, method, path, { body, headers: body === undefined ? {} : { "content-type": contentType } });
  return { status: r.status, body: r.body as { error?: { code: string; message: string } } };
}

/** `depth` nested objects around a value: {"a":{"a":...1}} */
const nest = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
/** A one-event append whose data nests so the whole body is `depth` levels (body, events, event, data, then extra). */
const appendAtDepth = (depth: number) => `{"events":[{"kind":"attention.required","data":{"reason":"deep","extra":${nest(depth - 4)}}}]}`;

describe("query and path numbers", () => {
  test.each([
    [`/v1/sessions/${ses}/events?limit=99999999999999999999`, "limit"],
    [`/v1/sessions/${ses}/events?limit=1.5`, "limit"],
    [`/v1/sessions/${ses}/events?limit=0`, "limit"],
    [`/v1/sessions/${ses}/events?limit=${API_LIMITS.eventsPage + 1}`, "limit"],
    [`/v1/sessions/${ses}/events?limit=ten`, "limit"],
    [`/v1/sessions/${ses}/events?from=1e30`, "from"],
    [`/v1/sessions/${ses}/events?from=2.5`, "from"],
    [`/v1/sessions/${ses}/events?from=-1`, "from"],
    ["/v1/boxes/b/egress?limit=1e9", "limit"],
    ["/v1/boxes/b/egress?limit=1.5", "limit"],
    ["/v1/boxes/b/egress?decision=maybe", "decision"],
    [`/v1/sessions/${ses}/output/1.5`, "chunk"],
    [`/v1/sessions/${ses}/output/99999999999999999999`, "chunk"],
    [`/v1/sessions?box=${"x".repeat(200)}`, "box"],
  ])("GET %s is a 400 naming %s", async (path, field) => {
    const r = await call("GET", path);
    expect(r.status).toBe(400);
    expect(r.body.error!.code).toBe("invalid");
    expect(r.body.error!.message).toStartWith(`${field}: `);
  });

  test("numbers in range still page", async () => {
    const r = await app.handle(new Request(`http://hutch/v1/sessions/${ses}/events?from=1&limit=${API_LIMITS.eventsPage}`));
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ events: [], next: 1 });
    expect((await call("GET", "/v1/boxes/b/egress?limit=1000")).status).toBe(200);
  });
});

describe("bodies", () => {
  test("a body nested one level past the limit is refused naming where; at the limit it is stored", async () => {
    const before = store.last(ses);
    const deep = await call("POST", `/v1/sessions/${ses}/events`, appendAtDepth(API_LIMITS.depth + 1));
    expect(deep.status).toBe(400);
    expect(deep.body.error!.message).toBe(`events.0.data.extra.a.a…: nested deeper than ${API_LIMITS.depth} levels`);
    expect(store.last(ses)).toBe(before);
    const ok = await call("POST", `/v1/sessions/${ses}/events`, appendAtDepth(API_LIMITS.depth));
    expect(ok.status).toBe(200);
    expect(store.last(ses)).toBe(before + 1);
  });

  test.each([
    ["POST", "/v1/boxes", "[".repeat(200_000) + "]".repeat(200_000), "0.0.0.0.0.0…: nested deeper than"],
    ["PATCH", "/v1/boxes/b/policy", `{"allow":${"[".repeat(50_000)}${"]".repeat(50_000)}}`, "allow.0.0.0.0.0…: nested deeper than"],
    ["POST", `/v1/sessions/${ses}/annotations`, `{"text":"x","anchor":${nest(100_000)}}`, "anchor.a.a.a.a.a…: nested deeper than"],
  ])("%s %s with hostile nesting is a 400, not a stack overflow", async (method, path, body, message) => {
    const r = await call(method, path, body);
    expect(r.status).toBe(400);
    expect(r.body.error!.message).toStartWith(message);
  });

  test.each([
    ["POST", "/v1/boxes", "1", "body: expected a JSON object, got number"],
    ["POST", "/v1/boxes", "[]", "body: expected a JSON object, got an array"],
    ["POST", `/v1/sessions/${ses}/driver/acquire`, "null", "body: expected a JSON object, got null"],
    ["POST", `/v1/sessions/${ses}/driver/acquire`, '"x"', "body: expected a JSON object, got string"],
    ["POST", `/v1/sessions/${ses}/driver/acquire`, '{"leaseMs":"5000"}', "leaseMs: "],
    ["POST", `/v1/sessions/${ses}/driver/acquire`, '{"leaseMs":1.5}', "leaseMs: "],
    ["POST", "/v1/boxes", '{"name":"c","cpus":"2"}', "cpus: "],
    ["POST", "/v1/boxes", '{"name":"c","memoryMiB":1e30}', "memoryMiB: "],
    ["POST", `/v1/sessions/${ses}/events`, '{"events":{"kind":"attention.required"}}', "events: "],
    ["POST", `/v1/sessions/${ses}/events`, '{"events":[{"kind":7,"data":{}}]}', "events.0.kind: "],
    ["POST", "/v1/boxes", '{"name":', "body: not valid JSON"],
  ])("%s %s %s is a 400: %s", async (method, path, body, message) => {
    const r = await call(method, path, body);
    expect(r.status).toBe(400);
    expect(r.body.error!.code).toBe("invalid");
    expect(r.body.error!.message).toStartWith(message);
  });

  test("free-form event data is bounded per event, naming which event", async () => {
    const before = store.last(ses);
    const big = { kind: "attention.required", data: { reason: "x", extra: "y".repeat(API_LIMITS.eventData) } };
    const r = await call(
      "POST",
      `/v1/sessions/${ses}/events`,
      JSON.stringify({ events: [{ kind: "attention.required", data: { reason: "fine" } }, big] }),
    );
    expect(r.status).toBe(400);
    expect(r.body.error!.message).toBe(`events.1.data: Expected at most ${API_LIMITS.eventData} characters of JSON`);
    expect(store.last(ses)).toBe(before);
  });

  test("a body over the size limit is refused before it is parsed", async () => {
    const r = await call("POST", "/v1/boxes", `{"name":"${"a".repeat(API_LIMITS.bodyBytes)}"}`);
    expect(r.status).toBe(400);
    expect(r.body.error!.message).toBe(`body: larger than ${API_LIMITS.bodyBytes} bytes`);
  });

  test("a body that is not JSON by its content type is refused", async () => {
    const r = await call("POST", "/v1/boxes", "name=c", "application/x-www-form-urlencoded");
    expect(r.status).toBe(400);
    expect(r.body.error!.message).toStartWith("content-type: application/x-www-form-urlencoded is not JSON");
    expect((await call("GET", "/v1/boxes/c")).status).toBe(404);
  });

  test("an empty body is an empty object: a required field is named", async () => {
    const r = await call("POST", "/v1/boxes", "");
    expect(r.status).toBe(400);
    expect(r.body.error!.message).toStartWith("box name: ");
  });

  test("bodies are documented as JSON", async () => {
    const doc = (await (await app.handle(new Request("http://hutch/openapi/json"))).json()) as {
      paths: Record<string, Record<string, { requestBody?: { content: object } }>>;
    };
    expect(Object.keys(doc.paths["/v1/sessions/{id}/events"]!.post!.requestBody!.content)).toEqual(["application/json"]);
  });
});
