// Schedules in-process: the routes (app.handle) and the timer on an injected
// clock, running real headless turns (the shell agent) in a real process box
// over a real sqlite file. The clock is the real one shifted by an offset the
// tests move, so a run "due in a minute" fires at once and --max-run still
// passes in real time.
import { afterAll, describe, expect, test } from "bun:test";
import { Events, read, type Schedule, type SessionEvent } from "@hutch/shared";
import { ask, testApp } from "./app-helpers.ts";
import { buildApp } from "../src/daemon/app.ts";
import { ScheduleService, scheduleActor } from "../src/schedule/service.ts";
import { ScheduleStore } from "../src/store/schedules.ts";
import type { Principal } from "../src/auth/service.ts";

process.env.HUTCH_AGENT_INSTALL = "0";
const t = await testApp("hutch-sch-", { server: true });
let offset = 0;
const clock = { now: () => Date.now() + offset };
const store = new ScheduleStore(t.db);
const deps = { store, boxes: t.services.boxes, sessions: t.services.sessions, sessionStore: t.services.sessionStore, clock };
const schedules = new ScheduleService(deps);
const app = buildApp({ ...t.services, home: t.home, schedules });
afterAll(async () => {
  await schedules.drain();
  for (const b of t.services.boxes.list()) await t.services.boxes.delete(b.id, null);
  t.close();
});

const call = async (method: string, path: string, body?: unknown, who?: Principal) => ask(app, method, path, { body, who });
const add = async (body: Record<string, unknown>): Promise<Schedule> => {
  const r = await call("POST", "/v1/schedules", { box: "sb", agent: "shell", prompt: "echo hi", ...body });
  expect(r.status, r.text).toBe(201);
  return r.body as Schedule;
};
/** Moves the clock to just after the schedule's next run. */
const reach = (s: Schedule) => {
  offset += Date.parse(s.nextAt!) - clock.now() + 1;
};
const log = (session: string): SessionEvent[] => {
  const page = t.services.sessionStore.readText(session, 1, 10_000);
  return page.text.split("\n").map((l) => JSON.parse(l) as SessionEvent);
};

expect((await call("POST", "/v1/boxes", { name: "sb" })).status).toBe(201);

describe("routes", () => {
  test.each([
    [{ cron: "61 * * * *" }, 400, 'cron "61 * * * *": minute: 61 is outside 0-59'],
    [{ cron: "* * * * *", at: "+1m" }, 400, "give exactly one of cron and at"],
    [{}, 400, "give exactly one of cron and at"],
    [{ at: "yesterday" }, 400, "expected an ISO 8601 time"],
    [{ at: "+1m", maxRun: "forever" }, 400, 'max-run "forever"'],
    [{ at: "+1m", box: "nope" }, 404, 'no box named "nope"'],
    [{ at: "+1m", agent: "nope" }, 400, "agent"],
    [{ at: "+1m", extra: 1 }, 400, "extra"],
  ])("%j is refused (%i), saying why", async (body, status, message) => {
    const r = await call("POST", "/v1/schedules", { box: "sb", agent: "shell", prompt: "echo hi", ...body });
    expect(r.status).toBe(status);
    expect(r.body.error.message).toContain(message);
    expect(store.schedules()).toEqual([]);
  });

  test("add, list, info, pause, resume, rm; an unknown id is missing with the command that lists them", async () => {
    const s = await add({ cron: "0 9 * * mon-fri", maxRun: "10m", catchUp: "skip" });
    expect(s).toMatchObject({ boxName: "sb", cron: "0 9 * * mon-fri", at: null, maxRunS: 600, catchUp: "skip", state: "active", runs: 0 });
    expect(new Date(s.nextAt!).getMinutes() * 60 + new Date(s.nextAt!).getSeconds()).toBe(s.spreadS);
    expect((await call("GET", "/v1/schedules")).body.map((x: Schedule) => x.id)).toEqual([s.id]);
    expect((await call("GET", "/v1/schedules?box=sb")).body).toHaveLength(1);
    expect((await call("GET", `/v1/schedules/${s.id}`)).body.id).toBe(s.id);
    const paused = (await call("POST", `/v1/schedules/${s.id}/pause`)).body as Schedule;
    expect([paused.state, paused.nextAt]).toEqual(["paused", null]);
    const resumed = (await call("POST", `/v1/schedules/${s.id}/resume`)).body as Schedule;
    expect([resumed.state, resumed.nextAt]).toEqual(["active", s.nextAt]);
    expect((await call("DELETE", `/v1/schedules/${s.id}`)).body).toEqual({ id: s.id, removed: true });
    // A one-off paused and resumed before its time keeps it.
    const once = await add({ at: "+1h" });
    await call("POST", `/v1/schedules/${once.id}/pause`);
    const back = (await call("POST", `/v1/schedules/${once.id}/resume`)).body as Schedule;
    expect([back.state, back.nextAt]).toEqual(["active", once.at]);
    await call("DELETE", `/v1/schedules/${once.id}`);
    for (const [m, p] of [
      ["GET", `/v1/schedules/${s.id}`],
      ["POST", `/v1/schedules/${s.id}/run`],
      ["DELETE", `/v1/schedules/${s.id}`],
    ] as const) {
      const r = await call(m, p);
      expect(r.status).toBe(404);
      expect(r.body.error.hint).toBe("list them: hutch schedule list");
    }
    expect((await call("GET", "/v1/schedules/nope")).status).toBe(400);
  });

  test("server mode: a schedule is its adder's, and is added only on a box the caller may drive", async () => {
    await t.services.auth.addUser("alice");
    await t.services.auth.addUser("bob");
    const as = (user: string): Principal => ({ user, scopes: ["read", "write"], remote: true, token: "tok_000000000000" });
    expect((await call("POST", "/v1/boxes", { name: "ab" }, as("alice"))).status).toBe(201);
    const mine = await call("POST", "/v1/schedules", { box: "ab", agent: "shell", prompt: "x", at: "+1h" }, as("alice"));
    expect(mine.status, mine.text).toBe(201);
    const hers = await call("POST", "/v1/schedules", { box: "ab", agent: "shell", prompt: "x", at: "+1h" }, as("bob"));
    expect(hers.status).toBe(404);
    expect((await call("GET", `/v1/schedules/${mine.body.id}`, undefined, as("bob"))).status).toBe(404);
    expect((await call("GET", "/v1/schedules", undefined, as("bob"))).body).toEqual([]);
    expect((await call("GET", "/v1/schedules", undefined, as("alice"))).body.map((x: Schedule) => x.id)).toEqual([mine.body.id]);
    // Deleting the box takes its schedules with it.
    await t.services.boxes.delete("ab", null);
    expect(store.schedule(mine.body.id)).toBeNull();
  });
});

describe("the timer", () => {
  test("a cron run fires when its time comes: it starts the stopped box, runs the turn as the schedule, and stops the box again", async () => {
    const s = await add({ cron: "* * * * *", prompt: "echo scheduled > /workspace/out; echo done" });
    expect(t.services.boxes.get("sb").state).toBe("stopped");
    offset = Date.parse(s.nextAt!) - Date.now() - 5000;
    schedules.tick();
    expect(store.schedule(s.id)!.runs).toBe(0);
    reach(s);
    schedules.tick();
    await schedules.drain();
    const after = store.schedule(s.id)!;
    const run = JSON.parse(after.last_run!);
    expect(run).toMatchObject({ trigger: "cron", status: "ok", exit: 0, woke: true });
    expect(run.boxSeconds).toBeGreaterThan(0);
    expect(after.runs).toBe(1);
    // The next run is the next minute, with the same spread.
    expect(after.next_at! - Date.parse(s.nextAt!)).toBe(60_000);

    const events = log(run.session);
    const kinds = events.map((e) => e.kind);
    expect(kinds.slice(0, 3)).toEqual(["session.created", "schedule.run.started", "input.sent"]);
    expect(kinds.slice(-2)).toEqual(["schedule.run.finished", "session.closed"]);
    const mine = events.filter((e) =>
      ["session.created", "schedule.run.started", "input.sent", "schedule.run.finished", "session.closed"].includes(e.kind),
    );
    expect(new Set(mine.map((e) => JSON.stringify(e.actor)))).toEqual(
      new Set([JSON.stringify({ kind: "orchestrator", id: `${after.owner}/schedule:${s.id}` })]),
    );
    expect(read(events[1]!, Events.scheduleRunStarted)).toMatchObject({ schedule: s.id, trigger: "cron", woke: true });
    expect(read(events.at(-2)!, Events.scheduleRunFinished)).toMatchObject({ schedule: s.id, status: "ok", exit: 0 });
    expect(events.some((e) => read(e, Events.messageCompleted)?.text.includes("done"))).toBe(true);
    // The box is back as the run found it.
    expect(t.services.boxes.get("sb").state).toBe("stopped");
    await call("DELETE", `/v1/schedules/${s.id}`);
  }, 60_000);

  test("--max-run stops a turn that runs on: status timeout, no exit code, the session closed", async () => {
    const s = await add({ at: "+1m", prompt: "sleep 60", maxRun: "2s" });
    reach(s);
    schedules.tick();
    await schedules.drain();
    const row = store.schedule(s.id)!;
    const run = JSON.parse(row.last_run!);
    expect(run).toMatchObject({ trigger: "at", status: "timeout", exit: null });
    expect(run.reason).toContain("--max-run 2s");
    expect(run.ms).toBeLessThan(30_000);
    expect([row.state, row.next_at]).toEqual(["done", null]);
    expect(t.services.sessionStore.get(run.session)!.state).toBe("closed");
  }, 60_000);

  test("runs missed while the daemon was down: --catch-up once runs one at start, skip runs none; both move on", async () => {
    const once = await add({ cron: "*/5 * * * *", catchUp: "once", prompt: "echo caught" });
    const skip = await add({ cron: "*/5 * * * *", catchUp: "skip", prompt: "echo skipped" });
    // The daemon "was down" across one of their times, and is back a minute later (well within LATE_MS).
    offset = Date.parse(once.nextAt!) - Date.now() + 60_000;
    const starting = new ScheduleService(deps);
    starting.start();
    starting.stop();
    await starting.drain();
    const o = store.schedule(once.id)!;
    const k = store.schedule(skip.id)!;
    expect([o.runs, o.skipped, JSON.parse(o.last_run!).trigger, JSON.parse(o.last_run!).status]).toEqual([1, 0, "catch-up", "ok"]);
    expect([k.runs, k.skipped, k.last_run]).toEqual([0, 1, null]);
    for (const r of [o, k]) expect(r.next_at!).toBeGreaterThan(clock.now());
    // A second look at the same moment finds nothing due.
    schedules.tick();
    await schedules.drain();
    expect(store.schedule(once.id)!.runs).toBe(1);
    await call("DELETE", `/v1/schedules/${once.id}`);
    await call("DELETE", `/v1/schedules/${skip.id}`);
  }, 60_000);

  test("two timers that saw the same due run: one claims it (a compare-and-set on its next time), the other cannot", async () => {
    const s = await add({ cron: "* * * * *", prompt: "echo once" });
    reach(s);
    const a = store.dueSchedules(clock.now()).find((r) => r.id === s.id)!;
    const b = store.dueSchedules(clock.now()).find((r) => r.id === s.id)!;
    expect(store.claimRun(a.id, a.next_at!, a.next_at! + 60_000, {})).toBe(true);
    expect(store.claimRun(b.id, b.next_at!, b.next_at! + 60_000, { skipped: 9 })).toBe(false);
    expect(store.schedule(s.id)!).toMatchObject({ next_at: a.next_at! + 60_000, skipped: 0 });
    await call("DELETE", `/v1/schedules/${s.id}`);
  });

  test("run now: answers with the run's session while its turn goes on; a second run now is refused until it ends", async () => {
    const s = await add({ at: "+1h", prompt: "sleep 1; echo woke" });
    const r = await call("POST", `/v1/schedules/${s.id}/run`);
    expect(r.status, r.text).toBe(200);
    expect(r.body.lastRun).toMatchObject({ trigger: "manual", status: "running" });
    const again = await call("POST", `/v1/schedules/${s.id}/run`);
    expect(again.status).toBe(409);
    expect(again.body.error.hint).toContain(`hutch session watch ${r.body.lastRun.session}`);
    await schedules.drain();
    expect(JSON.parse(store.schedule(s.id)!.last_run!)).toMatchObject({ session: r.body.lastRun.session, status: "ok", exit: 0 });
    // A one-off run by hand still runs at its time.
    expect(store.schedule(s.id)!.state).toBe("active");
  }, 60_000);

  test("a daemon restart mid-run: the next daemon ends the run in its session as interrupted", async () => {
    const s = await add({ at: "+1h", prompt: "sleep 60" });
    // What a restarted daemon finds: a run's session still open and the row saying running.
    const row = store.schedule(s.id)!;
    const ses = await t.services.sessions.create({ box: "sb", agent: "shell", prompt: "sleep 60" }, scheduleActor(row));
    const startedAt = new Date(clock.now() - 5000).toISOString();
    store.updateSchedule(s.id, {
      last_run: JSON.stringify({
        session: ses.id,
        trigger: "cron",
        status: "running",
        startedAt,
        exit: null,
        ms: 0,
        tokens: null,
        boxSeconds: 0,
        woke: true,
      }),
    });
    const restarted = new ScheduleService(deps);
    restarted.recover();
    await waitUntil(() => t.services.sessionStore.get(ses.id)!.state === "closed");
    const run = JSON.parse(store.schedule(s.id)!.last_run!);
    expect(run).toMatchObject({ status: "interrupted", reason: "the daemon stopped during this run" });
    expect(run.ms).toBeGreaterThanOrEqual(5000);
    const events = log(ses.id);
    expect(read(events.at(-2)!, Events.scheduleRunFinished)).toMatchObject({ schedule: s.id, status: "interrupted" });
    expect(events.at(-1)!.kind).toBe("session.closed");
  }, 60_000);
});

async function waitUntil(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await Bun.sleep(50);
  expect(ok()).toBe(true);
}
