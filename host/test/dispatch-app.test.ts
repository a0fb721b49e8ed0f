// The dispatch routes in-process (app.handle, no socket): bodies checked by
// schema before any work, unknown ids answered as missing, and a box that is
// not there refused before a dispatch is recorded.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDb } from "../src/store/db.ts";
import { ProcessEngine } from "../src/engine/process/index.ts";
import { buildApp } from "../src/daemon/app.ts";
import { createServices } from "../src/daemon/services.ts";

const home = mkdtempSync(join(tmpdir(), "hutch-dsp-app-"));
const db = openDb(join(home, "hutch.db"));
const services = await createServices(home, db, { process: new ProcessEngine(home) });
const app = buildApp({ ...services, home });
afterAll(() => {
  db.close();
  rmSync(home, { recursive: true, force: true });
});

async function call(method: string, path: string, body?: unknown) {
  const res = await app.handle(
    new Request(`http://hutch${path}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string; hint?: string } } };
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
