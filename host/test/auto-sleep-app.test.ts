// --sleep-after and --max-awake through the boxes routes (app.handle): read by
// the daemon, shown in box info, changeable in any state, refused naming the
// flag, and refused where the box's engine cannot sleep.
import { afterAll, expect, test } from "bun:test";
import { ask, testApp } from "./app-helpers.ts";
import { PROCESS_CAPABILITIES } from "../src/engine/process/index.ts";

const t = await testApp("hutch-autosleep-");
afterAll(async () => {
  for (const b of t.services.boxes.list()) await t.services.boxes.delete(b.id, null);
  t.close();
});
const canSleep = PROCESS_CAPABILITIES.sleep !== null;

test("a bad duration is refused naming the flag; off is accepted and shows nothing", async () => {
  expect((await ask(t.app, "POST", "/v1/boxes", { body: { name: "p1" } })).status).toBe(201);
  const bad = await ask(t.app, "PATCH", "/v1/boxes/p1", { body: { sleepAfter: "soon" } });
  expect(bad.status).toBe(400);
  expect(bad.body.error.message).toContain('--sleep-after "soon": expected a duration from 1s to 30d');
  const off = await ask(t.app, "PATCH", "/v1/boxes/p1", { body: { sleepAfter: "off", maxAwake: "off" } });
  expect(off.status, off.text).toBe(200);
  expect(off.body.autoSleep).toBeUndefined();
});

test("set on a running box changes when it sleeps at once (limits still need it stopped); box info shows it, or the engine refuses", async () => {
  expect((await ask(t.app, "POST", "/v1/boxes", { body: { name: "p2", start: true } })).status).toBe(201);
  const r = await ask(t.app, "PATCH", "/v1/boxes/p2", { body: { sleepAfter: "5s", maxAwake: "2h" } });
  if (canSleep) {
    expect(r.status, r.text).toBe(200);
    expect(r.body.autoSleep).toEqual({ sleepAfterS: 5, maxAwakeS: 7200 });
    expect(t.services.boxes.autoSleep(r.body.id)).toEqual({ sleepAfterMs: 5000, maxAwakeMs: 7_200_000 });
  } else {
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe(
      'the process engine cannot put boxes to sleep on this host, so --sleep-after and --max-awake do not apply to box "p2"',
    );
  }
  const limits = await ask(t.app, "PATCH", "/v1/boxes/p2", { body: { memoryMiB: 512 } });
  expect(limits.status).toBe(409);
});
