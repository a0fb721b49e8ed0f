// Schedules: a box, an agent and a prompt, run as one headless turn on a cron
// expression or once at a time. The daemon's timer reads the rows; a run wakes
// (or starts) the box, runs the turn in a new session whose events the
// schedule writes as its own actor, ends it at --max-run, and puts the box back
// as it found it. The one rule that matters: a due run is claimed by moving the
// row's next time with a compare-and-set before anything else happens, so a
// run fires once whoever looks (a second timer, a second server).
import {
  type Actor,
  type BoxState,
  emit,
  Events,
  HutchError,
  newId,
  read,
  type Schedule,
  type ScheduleCreateBody,
  type ScheduleRun,
  type ScheduleTrigger,
  type SessionEvent,
  settled,
  turnOk,
} from "@hutch/shared";
import type { BoxService } from "../box/service.ts";
import type { SessionService } from "../session/service.ts";
import type { ScheduleRow, ScheduleTable, SessionLog } from "../store/types.ts";
import { harness } from "../harness/index.ts";
import { log } from "../log.ts";
import { type Cron, parseCron } from "./cron.ts";
import { missed, nextDue, parseAt, parseMaxRun, spreadOf, spreadWindow } from "./when.ts";

const logger = log.create({ service: "schedule" });

/** How long a run may take when no --max-run is given. */
export const DEFAULT_MAX_RUN_MS = 30 * 60_000;
/** How often the timer looks for due runs. */
const TICK_MS = 1000;

/** The time, injected so tests need not wait for minutes. */
export interface Clock {
  now(): number;
}
export const realClock: Clock = { now: () => Date.now() };

export interface ScheduleDeps {
  store: ScheduleTable;
  boxes: BoxService;
  sessions: SessionService;
  sessionStore: SessionLog;
  clock?: Clock;
  /**
   * Whether nothing but this run uses the box now (no client attached, no
   * exec, no other turn), so it may be put back to sleep. Defaults to: no
   * other open session of the box is driven or busy.
   */
  idle?: (boxId: string, exceptSession: string) => boolean;
  /** Puts a box the run woke back as it was: asleep, or stopped. */
  putBack?: (boxId: string, before: BoxState, actor: Actor) => Promise<void>;
}

/** The actor a schedule's events carry: its owner's orchestrator, named for the schedule. */
export const scheduleActor = (row: Pick<ScheduleRow, "id" | "owner">): Actor => ({
  kind: "orchestrator",
  id: `${row.owner}/schedule:${row.id}`,
});

export class ScheduleService {
  private readonly clock: Clock;
  private timer?: ReturnType<typeof setInterval>;
  /** Runs in flight, by schedule. */
  private readonly running = new Map<string, Promise<void>>();

  constructor(private readonly d: ScheduleDeps) {
    this.clock = d.clock ?? realClock;
  }

  /** Adds a schedule on a box the caller may drive (the controller checks that in server mode). */
  create(body: ScheduleCreateBody, owner: string): Schedule {
    if ((body.cron === undefined) === (body.at === undefined))
      throw new HutchError("invalid", "give exactly one of cron and at", 'hutch schedule add BOX --cron "0 * * * *" … or --at +10m …');
    const box = this.d.boxes.get(body.box);
    const now = this.clock.now();
    const maxRun = parseMaxRun(body.maxRun, DEFAULT_MAX_RUN_MS);
    const agent = harness(body.agent);
    let cron: Cron | null = null;
    let at: number | null = null;
    let spread = 0;
    let next: number | null;
    if (body.cron !== undefined) {
      cron = parseCron(body.cron);
      spread = spreadOf(box.id, spreadWindow(cron, now));
      next = nextDue(cron, spread, now);
    } else {
      at = parseAt(body.at!, now);
      next = at;
    }
    // After the schedule's own fields, so a bad expression is named before a missing secret.
    if (agent.bindings.length) this.d.sessions.agentReady(agent.name, agent.bindings, owner, box.id);
    const row: ScheduleRow = {
      id: newId("sch", now),
      box_id: box.id,
      owner,
      agent: agent.name,
      prompt: body.prompt,
      cron: cron?.source ?? null,
      at,
      max_run_ms: maxRun,
      catch_up: body.catchUp ?? "once",
      spread_ms: spread,
      state: "active",
      next_at: next,
      last_run: null,
      runs: 0,
      skipped: 0,
      created_at: new Date(now).toISOString(),
    };
    this.d.store.insertSchedule(row);
    logger.info("schedule added", {
      schedule: row.id,
      box: box.name,
      ...(row.cron ? { cron: row.cron } : { at: new Date(at!).toISOString() }),
    });
    return this.toSchedule(row);
  }

  /** Every schedule (`user`: only that user's). */
  list(user: string | null, box?: string): Schedule[] {
    const boxId = box !== undefined ? this.d.boxes.get(box).id : undefined;
    return this.d.store
      .schedules({ ...(user !== null ? { owner: user } : {}), ...(boxId ? { boxId } : {}) })
      .map((r) => this.toSchedule(r));
  }

  get(id: string, user: string | null): Schedule {
    return this.toSchedule(this.row(id, user));
  }

  remove(id: string, user: string | null): { id: string; removed: true } {
    this.row(id, user);
    this.d.store.removeSchedule(id);
    logger.info("schedule removed", { schedule: id });
    return { id, removed: true };
  }

  pause(id: string, user: string | null): Schedule {
    const row = this.row(id, user);
    if (row.state === "active") this.d.store.updateSchedule(id, { state: "paused", next_at: null });
    return this.get(id, user);
  }

  /** Active again, from now: runs whose time passed while it was paused are not caught up. */
  resume(id: string, user: string | null): Schedule {
    const row = this.row(id, user);
    if (row.state !== "paused") return this.toSchedule(row);
    const now = this.clock.now();
    // A one-off resumed before its time still runs then; after it, it is over.
    const next = row.at !== null ? (row.at > now ? row.at : null) : this.nextAfter(row, now);
    this.d.store.updateSchedule(id, next === null ? { state: "done", next_at: null } : { state: "active", next_at: next });
    return this.get(id, user);
  }

  /** Runs it now, whatever its state; returns once its session exists (the turn goes on). */
  async runNow(id: string, user: string | null): Promise<Schedule> {
    const row = this.row(id, user);
    if (this.running.has(id))
      throw new HutchError(
        "conflict",
        `schedule ${id} is running now`,
        `watch it: hutch session watch ${this.toSchedule(row).lastRun?.session}`,
      );
    const begun = Promise.withResolvers<void>();
    this.launch(row, "manual", begun);
    await begun.promise;
    return this.get(id, user);
  }

  /**
   * Starts the timer. Its first look happens now, with every due run counted
   * as missed (its time came while the daemon was down): run once when the
   * schedule says --catch-up once, skipped otherwise.
   */
  start(): void {
    this.recover();
    this.tick(true);
    this.timer = setInterval(() => this.tick(false), TICK_MS);
  }

  /** Stops the timer; runs in flight are left to the daemon's shutdown (their turns end with it, and recover says so). */
  stop(): void {
    clearInterval(this.timer);
  }

  /** Waits for every run in flight (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.running.size) await Promise.all([...this.running.values()]);
  }

  /** One look at the due runs: each is claimed (its next time moved on), then fired, skipped, or counted as skipped. */
  tick(starting = false): void {
    const now = this.clock.now();
    for (const row of this.d.store.dueSchedules(now)) {
      const due = row.next_at!;
      const lost = missed(due, now, starting);
      const next = this.nextAfter(row, now);
      const skip = (lost && row.catch_up === "skip") || this.running.has(row.id);
      const fields = { ...(next === null ? { state: "done" as const } : {}), ...(skip ? { skipped: row.skipped + 1 } : {}) };
      if (!this.d.store.claimRun(row.id, due, next, fields)) continue;
      if (skip) {
        logger.info("schedule run skipped", {
          schedule: row.id,
          due: new Date(due).toISOString(),
          why: this.running.has(row.id) ? "the previous run is still going" : "missed while the daemon was down (--catch-up skip)",
        });
        continue;
      }
      this.launch(row, lost ? "catch-up" : row.cron ? "cron" : "at");
    }
  }

  /**
   * After a restart: a run that was going when the daemon stopped lost its
   * turn with it (SessionService.recoverTurns logs that); its session gets
   * its schedule.run.finished and is closed, and the row says interrupted.
   */
  recover(): void {
    for (const row of this.d.store.schedules()) {
      const last = row.last_run ? (JSON.parse(row.last_run) as ScheduleRun) : null;
      if (last?.status !== "running") continue;
      const end = this.clock.now();
      const run: ScheduleRun = {
        ...last,
        status: "interrupted",
        finishedAt: new Date(end).toISOString(),
        ms: Math.max(0, end - Date.parse(last.startedAt)),
        reason: "the daemon stopped during this run",
      };
      this.d.store.updateSchedule(row.id, { last_run: JSON.stringify(run) });
      if (last.session) void this.finishSession(row, last.session, run);
      logger.warn("a schedule's run was interrupted by a daemon restart", { schedule: row.id, session: last.session });
    }
  }

  private launch(row: ScheduleRow, trigger: ScheduleTrigger, begun?: PromiseWithResolvers<void>): void {
    const run = this.run(row, trigger, begun)
      .catch((err) => logger.error("schedule run failed", { schedule: row.id, err }))
      .finally(() => {
        this.running.delete(row.id);
        begun?.resolve();
      });
    this.running.set(row.id, run);
  }

  private async run(row: ScheduleRow, trigger: ScheduleTrigger, begun?: PromiseWithResolvers<void>): Promise<void> {
    const actor = scheduleActor(row);
    const t0 = this.clock.now();
    const startedAt = new Date(t0).toISOString();
    const record = (run: ScheduleRun) => this.d.store.updateSchedule(row.id, { last_run: JSON.stringify(run) });
    const base: ScheduleRun = {
      session: null,
      trigger,
      status: "running",
      startedAt,
      exit: null,
      ms: 0,
      tokens: null,
      boxSeconds: 0,
      woke: false,
    };
    const box = this.d.boxes.byId(row.box_id);
    if (!box) {
      record({ ...base, status: "error", finishedAt: startedAt, reason: "its box no longer exists" });
      return;
    }
    const before = box.state;
    const woke = before !== "running";
    let session: string;
    let wakeMs = 0;
    try {
      await this.d.boxes.ensureRunning(box.id, actor);
      wakeMs = Math.max(0, this.clock.now() - t0);
      const started = emit(Events.scheduleRunStarted, { schedule: row.id, trigger, box: box.id, agent: row.agent, woke, wakeMs });
      const s = await this.d.sessions.create(
        { box: box.id, agent: row.agent as ScheduleCreateBody["agent"], prompt: row.prompt, label: `schedule ${row.id}` },
        actor,
        [started],
      );
      session = s.id;
    } catch (err) {
      const reason = (err instanceof HutchError ? `${err.message}${err.hint ? ` (${err.hint})` : ""}` : String(err)).slice(0, 1024);
      const end = this.clock.now();
      record({
        ...base,
        status: "error",
        woke,
        finishedAt: new Date(end).toISOString(),
        ms: end - t0,
        boxSeconds: (end - t0) / 1000,
        reason,
      });
      this.countRun(row);
      logger.warn("a schedule's run could not start", { schedule: row.id, reason });
      return;
    }
    record({ ...base, session, woke });
    this.countRun(row);
    begun?.resolve();
    logger.info("schedule run started", { schedule: row.id, session, trigger, woke });

    const outcome = await this.waitTurn(session, t0 + row.max_run_ms);
    let reason: string | undefined;
    if (outcome === "timeout") {
      reason = `the turn ran past --max-run ${Math.round(row.max_run_ms / 1000)}s and was stopped`;
      await this.d.sessions.stopTurn(session);
    }
    const end = this.clock.now();
    const turn = this.d.sessions.summaries.turn(session);
    if (outcome === "error") reason = turn.agent?.reason ?? "the agent's turn ended in error";
    const run: ScheduleRun = {
      ...base,
      session,
      woke,
      status: outcome,
      finishedAt: new Date(end).toISOString(),
      exit: outcome === "timeout" ? null : (turn.exit?.code ?? turn.agent?.exit?.code ?? null),
      ms: end - t0,
      tokens: this.tokens(session),
      boxSeconds: (end - t0) / 1000,
      ...(reason ? { reason: reason.slice(0, 1024) } : {}),
    };
    record(run);
    await this.finishSession(row, session, run);
    logger.info("schedule run finished", { schedule: row.id, session, status: run.status, ms: run.ms });
    if (woke && this.boxIdle(box.id, session)) {
      await (this.d.putBack ?? this.defaultPutBack)(box.id, before, actor).catch((err) =>
        logger.warn("could not put the box back to sleep after a schedule's run", { schedule: row.id, box: box.name, err: String(err) }),
      );
    }
  }

  /** schedule.run.finished in the run's session, then the session closed: each run is its own log. */
  private async finishSession(row: ScheduleRow, session: string, run: ScheduleRun): Promise<void> {
    const actor = scheduleActor(row);
    const stored = this.d.sessionStore.get(session);
    if (!stored || stored.state === "closed") return;
    try {
      // Whatever the agent logs as its turn stops comes before the run's end.
      await this.d.sessions.stopTurn(session);
      await this.d.sessions.append(session, [
        {
          ...emit(Events.scheduleRunFinished, {
            schedule: row.id,
            status: run.status === "running" ? "interrupted" : run.status,
            exit: run.exit,
            ms: run.ms,
            tokens: run.tokens,
            boxSeconds: run.boxSeconds,
            ...(run.reason ? { reason: run.reason } : {}),
          }),
          actor,
        },
      ]);
      await this.d.sessions.close(session, actor, `schedule run ${run.status}`);
    } catch (err) {
      logger.warn("could not end a schedule run's session", { schedule: row.id, session, err: String(err) });
    }
  }

  private countRun(row: ScheduleRow): void {
    this.d.store.updateSchedule(row.id, { runs: (this.d.store.schedule(row.id)?.runs ?? row.runs) + 1 });
  }

  private boxIdle(boxId: string, except: string): boolean {
    if (this.d.idle) return this.d.idle(boxId, except);
    return this.d.sessionStore
      .list({ boxId, state: "open" })
      .every((s) => s.id === except || (s.driver === null && !this.d.sessions.busy(s.id)));
  }

  private readonly defaultPutBack = async (boxId: string, before: BoxState, actor: Actor): Promise<void> => {
    if (before === "asleep") await this.d.boxes.sleep(boxId, actor);
    else if (before === "stopped") await this.d.boxes.stop(boxId, null);
  };

  private async waitTurn(session: string, deadline: number): Promise<"ok" | "error" | "timeout"> {
    const done = () => {
      const t = this.d.sessions.summaries.turn(session);
      return settled(t, true) ? (turnOk(t) ? "ok" : "error") : null;
    };
    const now = done();
    if (now) return now;
    return await new Promise((resolve) => {
      const finish = (r: "ok" | "error" | "timeout") => {
        unsubscribe();
        clearInterval(watch);
        resolve(r);
      };
      const unsubscribe = this.d.sessions.bus.subscribe(session, () => {
        const r = done();
        if (r) finish(r);
      });
      // The deadline is read from the injected clock; a second is fine enough for --max-run.
      const watch = setInterval(() => {
        const r = done();
        if (r) finish(r);
        else if (this.clock.now() >= deadline) finish("timeout");
      }, 250);
    });
  }

  /** Tokens the agent reported in the run's session, summed; null when it reported none. */
  private tokens(session: string): { input: number; output: number } | null {
    let total: { input: number; output: number } | null = null;
    const page = this.d.sessionStore.readText(session, 1, 100_000);
    for (const line of page.text ? page.text.split("\n") : []) {
      const u = read(JSON.parse(line) as SessionEvent, Events.usageReported);
      if (!u?.available) continue;
      total ??= { input: 0, output: 0 };
      total.input += u.input ?? 0;
      total.output += u.output ?? 0;
    }
    return total;
  }

  private nextAfter(row: ScheduleRow, now: number): number | null {
    if (row.cron === null) return null;
    return nextDue(parseCron(row.cron), row.spread_ms, now);
  }

  /** A schedule the user may see, or a named error: another user's is answered as missing. */
  private row(id: string, user: string | null): ScheduleRow {
    const row = this.d.store.schedule(id);
    if (!row || (user !== null && row.owner !== user))
      throw new HutchError("not_found", `no schedule "${id}"`, "list them: hutch schedule list");
    return row;
  }

  toSchedule(row: ScheduleRow): Schedule {
    return {
      id: row.id,
      box: row.box_id,
      boxName: this.d.boxes.byId(row.box_id)?.name ?? "(deleted)",
      owner: row.owner,
      agent: row.agent,
      prompt: row.prompt,
      cron: row.cron,
      at: row.at === null ? null : new Date(row.at).toISOString(),
      maxRunS: Math.round(row.max_run_ms / 1000),
      catchUp: row.catch_up,
      state: row.state,
      nextAt: row.next_at === null ? null : new Date(row.next_at).toISOString(),
      spreadS: Math.round(row.spread_ms / 1000),
      lastRun: row.last_run ? (JSON.parse(row.last_run) as ScheduleRun) : null,
      runs: row.runs,
      skipped: row.skipped,
      createdAt: row.created_at,
    };
  }
}
