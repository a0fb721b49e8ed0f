// The daemon API in-process (app.handle, no socket), over a real sqlite file.
import { afterAll, describe, expect, test } from "bun:test";
import { ask, testApp } from "./app-helpers.ts";
import { check, FeedLine, firstError } from "@hutch/shared";

const { home, db, app, close } = await testApp("hutch-app-");
afterAll(close);

const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  ask(app, method, path, { body, headers });

describe("daemon API", () => {
  test("health", async () => {
    const r = await call("GET", "/v1/health");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, home });
  });

  test("create (stopped), list, get by name and by id", async () => {
    const c = await call("POST", "/v1/boxes", { name: "one" });
    expect(c.status).toBe(201);
    expect(c.body).toMatchObject({ name: "one", state: "stopped", desired: "stopped", engine: "process", isolation: "namespace" });
    expect(c.body.id).toMatch(/^box_[0-9a-z]{20}$/);
    expect((await call("GET", "/v1/boxes")).body.map((b: { name: string }) => b.name)).toEqual(["one"]);
    expect((await call("GET", "/v1/boxes/one")).body.id).toBe(c.body.id);
    expect((await call("GET", `/v1/boxes/${c.body.id}`)).body.name).toBe("one");
  });

  test("an idempotency key replays the first answer and creates nothing new", async () => {
    const a = await call("POST", "/v1/boxes", { name: "idem" }, { "idempotency-key": "k-1" });
    const b = await call("POST", "/v1/boxes", { name: "idem" }, { "idempotency-key": "k-1" });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.body.id).toBe(a.body.id);
    const c = await call("POST", "/v1/boxes", { name: "idem" }, { "idempotency-key": "k-2" });
    expect(c.status).toBe(409);
  });

  test.each([
    [{ name: "Upper" }, `box name "Upper": use lowercase letters`],
    [{ name: "" }, "box name"],
    [{ name: "x".repeat(64) }, "box name"],
    [{ name: "ok", engine: "docker" }, "engine"],
    [{ name: "ok", start: 1 }, "start"],
    [{ name: "ok", extra: true }, "extra"],
    [{}, "box name"],
  ])("a malformed body %j is a 400 naming %s, and stores nothing", async (body, field) => {
    const before = (await call("GET", "/v1/boxes")).body.length;
    const r = await call("POST", "/v1/boxes", body);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid");
    expect(r.body.error.message).toStartWith(`${field}`);
    expect((await call("GET", "/v1/boxes")).body.length).toBe(before);
  });

  test("not JSON at all is a 400", async () => {
    const r = await call("POST", "/v1/boxes", "{nope");
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid");
  });

  test("an unknown box is a 404 with the next command", async () => {
    const r = await call("POST", "/v1/boxes/ghost/start");
    expect(r.status).toBe(404);
    expect(r.body.error).toMatchObject({ code: "not_found", message: 'no box named "ghost"', hint: "list boxes: hutch box list" });
  });

  test("deleting a stopped box removes its rows and files", async () => {
    const c = await call("POST", "/v1/boxes", { name: "gone" });
    const d = await call("DELETE", "/v1/boxes/gone");
    expect(d.status).toBe(200);
    expect(d.body).toEqual({ id: c.body.id, name: "gone", deleted: true });
    expect((await call("GET", "/v1/boxes/gone")).status).toBe(404);
    expect(db.query("SELECT count(*) AS n FROM ops WHERE box_id = ?").get(c.body.id)).toEqual({ n: 0 });
  });

  test("the stream endpoint answers a plain GET with 426 and is documented", async () => {
    const r = await call("GET", "/v1/boxes/one/stream");
    expect(r.status).toBe(426);
    const doc = await call("GET", "/openapi/json");
    expect(Object.keys(doc.body.paths)).toContain("/v1/boxes/{ref}/stream");
  });
});

test("the change feed writes the lines shared/src/api.ts defines: hello, then a line per change", async () => {
  const stop = new AbortController();
  const res = await app.handle(new Request("http://hutch/v1/changes", { signal: stop.signal }));
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  const nextLine = async (): Promise<unknown> => {
    while (!buf.includes("\n")) buf += (await reader.read()).value ?? "";
    const line = buf.slice(0, buf.indexOf("\n"));
    buf = buf.slice(line.length + 1);
    return JSON.parse(line);
  };
  const lines = [await nextLine()];
  expect((await call("POST", "/v1/boxes", { name: "feed" })).status).toBe(201);
  lines.push(await nextLine());
  stop.abort();
  for (const l of lines) expect(check(FeedLine, l) ? null : firstError(FeedLine, l)).toBeNull();
  expect(lines).toMatchObject([{ type: "hello" }, { type: "box", box: { name: "feed" } }]);
});
