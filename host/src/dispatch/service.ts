// Dispatch: k workers forked from one snapshot, each given the same task
// headless, each graded by a check it cannot edit, one winner kept. It runs in
// the daemon, not in the CLI that asked, so a Ctrl-C or a lost client changes
// nothing; the invariant is that every box it makes is named in its journal
// before it is made, so a daemon killed at any point leaves boxes the next
// daemon can find and delete (recover). The orchestration session is the
// dispatch's live log; the journal is its state.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  emit,
  Events,
  HutchError,
  newId,
  read,
  settled,
  turnOk,
  type Actor,
  type Dispatch,
  type DispatchCreateBody,
  type DispatchWorker,
  type SessionEvent,
  type SnapshotChange,
  type TypedEvent,
  type AgentName,
} from "@hutch/shared";
import type { BoxService } from "../box/service.ts";
import type { SessionService } from "../session/service.ts";
import type { SessionLog } from "../store/types.ts";
import type { SnapshotService } from "../snapshot/service.ts";
import { harness } from "../harness/index.ts";
import { SYSTEM } from "../actors.ts";
import { log } from "../log.ts";
import { diffOf, parseScore, protectedChanges, protectGlobs, runCheck, workTree } from "./grade.ts";
import type { Channel } from "../engine/channel.ts";
import { dispatchDir, journalIds, readJournal, writeJournal, type Journal } from "./journal.ts";

const logger = log.create({ service: "dispatch" });

/** How long a check may run when no --timeout is given, and a worker's turn. */
const DEFAULT_TIMEOUT_S = 1800;
const POLL_MS = 200;
/** A worker in one of these has its verdict. */
const FINAL: DispatchWorker["status"][] = ["passed", "failed", "timeout", "error"];

export interface DispatchDeps {
  home: string;
  boxes: BoxService;
  sessions: SessionService;
  store: SessionLog;
  snapshots: SnapshotService;
}

type Outcome = "ok" | "error" | "timeout" | "cancelled";

export class DispatchService {
  private readonly running = new Map<string, { abort: AbortController; journal: Journal; done: Promise<void> }>();

  constructor(private readonly d: DispatchDeps) {}

  async create(body: DispatchCreateBody, owner: string): Promise<Dispatch> {
    if ((body.from === undefined) === (body.box === undefined))
      throw new HutchError("invalid", "name exactly one of from (a snapshot) and box", "hutch dispatch --from SNAP … or --here");
    // Refused before anything is made: grading carries the work tree alone, so it must be one a snapshot keeps.
    const workdir = `/${(body.workdir ?? "/workspace")
      .split("/")
      .filter((p) => p !== "" && p !== ".")
      .join("/")}`;
    workTree(workdir);
    if (body.from) await this.d.snapshots.forkable(body.from);
    if (body.box) {
      const box = this.d.boxes.get(body.box);
      if (box.state !== "running" && box.state !== "stopped")
        throw new HutchError("not_ready", `box "${box.name}" is ${box.state}`, `start it: hutch box start ${box.name}`);
    }
    const id = newId("dsp");
    const session = newId("ses");
    const now = new Date().toISOString();
    const tag = id.slice(-8);
    const workers: DispatchWorker[] = Array.from({ length: body.k }, (_, i) => ({
      n: i + 1,
      agent: body.agents[i % body.agents.length]!,
      box: `dsp-${tag}-w${i + 1}`,
      boxDeleted: false,
      session: null,
      status: "pending",
      verdict: null,
      score: null,
      diffstat: null,
      snapshot: null,
      diff: null,
      usage: { input: 0, output: 0 },
    }));
    const dispatch: Dispatch = {
      id,
      state: "running",
      session,
      snapshot: body.from ?? null,
      workdir,
      check: body.check,
      pick: body.pick ?? "first",
      winner: null,
      winnerBox: null,
      workers,
      usage: { input: 0, output: 0 },
      tornDown: false,
      createdAt: now,
    };
    const j: Journal = { version: 1, dispatch, body, owner, boxes: [] };
    writeJournal(this.d.home, j);
    // The orchestration session belongs to no box: its box column holds the dispatch's id.
    await this.d.sessions.writer.insert({
      id: session,
      box_id: id,
      agent: "dispatch",
      label: `dispatch ${id}`,
      state: "open",
      owner,
      argv: "[]",
      pty: null,
      created_at: now,
    });
    this.log(j, [emit(Events.sessionCreated, { box: id, agent: "dispatch", label: `dispatch ${id}` })]);
    const abort = new AbortController();
    const done = this.run(j, abort.signal).catch((err) => logger.error("dispatch failed", { dispatch: id, err }));
    this.running.set(id, { abort, journal: j, done });
    void done.finally(() => this.running.delete(id));
    logger.info("dispatch started", { dispatch: id, k: body.k, agents: body.agents.join(",") });
    return structuredClone(dispatch);
  }

  /** A dispatch; with `user`, only one that user started (another's is answered as missing). */
  async get(id: string, user: string | null = null): Promise<Dispatch> {
    const j = this.running.get(id)?.journal ?? (/^dsp_[0-9a-z]{20}$/.test(id) ? await readJournal(this.d.home, id) : null);
    if (!j || (user !== null && j.owner !== user))
      throw new HutchError("not_found", `no dispatch "${id}"`, "list them: hutch dispatch list");
    return structuredClone(j.dispatch);
  }

  async list(user: string | null = null): Promise<Dispatch[]> {
    const out: Dispatch[] = [];
    for (const id of journalIds(this.d.home)) out.push(await this.get(id, user).catch(() => null as never));
    return out.filter(Boolean).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** Stops a running dispatch: every worker's turn is stopped, every box it made deleted; logs, diffs and verdicts stay. */
  async cancel(id: string, user: string | null = null): Promise<Dispatch> {
    await this.get(id, user);
    const live = this.running.get(id);
    if (!live) return this.get(id);
    live.abort.abort(new HutchError("conflict", "the dispatch was cancelled", `see what it kept: hutch dispatch status ${id}`));
    await live.done;
    return this.get(id);
  }

  /**
   * At daemon start: a dispatch that was running when the daemon died is not
   * resumed (its agents' headless turns died with the daemon). It is marked
   * interrupted at once and every box it made is deleted, in the background.
   */
  recover(): Promise<void>[] {
    const work: Promise<void>[] = [];
    for (const id of journalIds(this.d.home)) {
      // Read and marked before the daemon answers anything, so the first `dispatch status` already says so.
      let journal: Journal;
      try {
        journal = JSON.parse(readFileSync(join(dispatchDir(this.d.home, id), "journal.json"), "utf8")) as Journal;
      } catch (err) {
        logger.error("could not read a dispatch's journal", { dispatch: id, err });
        continue;
      }
      if (journal.dispatch.state !== "running" && journal.dispatch.tornDown) continue;
      if (journal.dispatch.state === "running") {
        journal.dispatch.state = "interrupted";
        journal.dispatch.reason =
          "the daemon stopped during this dispatch; its workers were torn down (their logs, diffs and verdicts kept)";
        journal.dispatch.winner = null;
        journal.dispatch.winnerBox = null;
        for (const w of journal.dispatch.workers) if (!FINAL.includes(w.status)) w.status = "cancelled";
        journal.dispatch.finishedAt = new Date().toISOString();
        writeJournal(this.d.home, journal);
        logger.warn("a dispatch was interrupted by a daemon restart; tearing it down", { dispatch: id });
      }
      work.push(
        this.teardown(journal, journal.dispatch.winnerBox)
          .then(() => this.finish(journal))
          .catch((err) => logger.error("could not tear down a dispatch", { dispatch: id, err })),
      );
    }
    return work;
  }

  /** Daemon shutdown: running dispatches are left as the journal has them, for the next daemon's recover. */
  async close(): Promise<void> {}

  private save(j: Journal): void {
    writeJournal(this.d.home, j);
  }

  private log(j: Journal, events: TypedEvent[]): void {
    this.d.sessions.log(
      j.dispatch.session,
      events.map((e) => ({ ...e, actor: SYSTEM })),
    );
  }

  private async run(j: Journal, signal: AbortSignal): Promise<void> {
    const d = j.dispatch;
    const body = j.body;
    try {
      if (!d.snapshot) {
        const base = body.box!;
        const snap = await this.d.snapshots.create(base, `dispatch ${d.id} base`, () => undefined, signal);
        d.snapshot = snap.snapshot.id;
        this.save(j);
        if (body.ownBox) await this.deleteBox(j, base);
      } else d.snapshot = (await this.d.snapshots.forkable(d.snapshot)).id;
      this.save(j);
      this.log(j, [
        emit(Events.dispatchStarted, {
          dispatch: d.id,
          snapshot: d.snapshot,
          k: d.workers.length,
          check: d.check.slice(0, 4096),
          task: body.task.slice(0, 65536),
        }),
      ]);
      await pool(d.workers, body.concurrency ?? d.workers.length, (w) => this.worker(j, w, signal));
      if (signal.aborted) throw signal.reason;
      const winner = pick(d.workers, d.pick);
      d.winner = winner?.n ?? null;
      d.winnerBox = winner?.box ?? null;
      d.state = "done";
    } catch (err) {
      const cancelled = signal.aborted;
      d.state = cancelled ? "cancelled" : "failed";
      d.reason = cancelled ? "cancelled; every box the dispatch made was deleted" : err instanceof Error ? err.message : String(err);
      d.winner = null;
      d.winnerBox = null;
      for (const w of d.workers) if (["pending", "running", "grading"].includes(w.status)) w.status = "cancelled";
    }
    d.finishedAt = new Date().toISOString();
    this.save(j);
    await this.teardown(j, d.winnerBox);
    this.finish(j);
  }

  /** The usage totals, the dispatch.finished event, the orchestration session closed. */
  private finish(j: Journal): void {
    const d = j.dispatch;
    d.usage = d.workers.reduce((a, w) => ({ input: a.input + w.usage.input, output: a.output + w.usage.output }), { input: 0, output: 0 });
    this.save(j);
    const row = this.d.store.get(d.session);
    if (!row || row.state === "closed") return;
    this.log(j, [
      emit(Events.dispatchFinished, {
        status: d.state === "running" ? "failed" : d.state,
        winner: d.winner,
        ...(d.reason ? { reason: d.reason.slice(0, 4096) } : {}),
        usage: d.usage,
      }),
    ]);
    void this.d.sessions.close(d.session, SYSTEM, `dispatch ${d.state}`).catch(() => undefined);
  }

  /** Deletes every box the dispatch made except keep (the winner's); closes the workers' sessions (their logs stay). */
  private async teardown(j: Journal, keep: string | null): Promise<void> {
    for (const w of j.dispatch.workers) {
      if (w.session && w.box !== keep)
        await this.d.sessions.close(w.session, SYSTEM, "dispatch over").catch((err) => logger.warn("close failed", { err }));
    }
    for (const name of [...j.boxes]) if (name !== keep) await this.deleteBox(j, name);
    // A worker whose box was never made (still pending at a cancel) has none left either.
    for (const w of j.dispatch.workers) if (w.box !== keep && !this.d.boxes.find(w.box)) w.boxDeleted = true;
    j.dispatch.tornDown = true;
    this.save(j);
  }

  private async deleteBox(j: Journal, name: string): Promise<void> {
    try {
      if (this.d.boxes.find(name)) await this.d.boxes.delete(name, null);
      j.boxes = j.boxes.filter((b) => b !== name);
      const w = j.dispatch.workers.find((x) => x.box === name);
      if (w) w.boxDeleted = true;
      this.save(j);
    } catch (err) {
      logger.error("could not delete a dispatch's box", { dispatch: j.dispatch.id, box: name, err });
    }
  }

  /** Names a box in the journal before it is made, so a crash cannot leave it unowned. */
  private claim(j: Journal, name: string): void {
    if (!j.boxes.includes(name)) j.boxes.push(name);
    this.save(j);
  }

  private async worker(j: Journal, w: DispatchWorker, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const d = j.dispatch;
    const t0 = performance.now();
    const actor: Actor = { kind: "orchestrator", id: `${j.owner}/dispatch` };
    const timeoutMs = (j.body.timeout ?? DEFAULT_TIMEOUT_S) * 1000;
    w.status = "running";
    this.claim(j, w.box);
    let outcome: Outcome = "error";
    let reason = "";
    try {
      const agent = harness(w.agent);
      await this.d.boxes.create(
        {
          name: w.box,
          from: d.snapshot!,
          start: true,
          ...(agent.bindings.length ? { secrets: agent.bindings } : {}),
          ...(agent.egress.length ? { allow: agent.egress } : {}),
        },
        null,
        j.owner,
      );
      const s = await this.d.sessions.create(
        { box: w.box, agent: w.agent as AgentName, prompt: j.body.task, label: `dispatch ${d.id} worker ${w.n}` },
        actor,
      );
      w.session = s.id;
      this.save(j);
      this.log(j, [emit(Events.dispatchWorkerStarted, { worker: w.n, agent: w.agent, box: w.box, session: s.id })]);
      outcome = await this.waitTurn(s.id, timeoutMs, signal);
      if (outcome !== "ok") {
        reason =
          outcome === "timeout"
            ? `the turn ran past --timeout ${timeoutMs / 1000}s and was stopped`
            : outcome === "cancelled"
              ? "cancelled"
              : (this.d.sessions.summaries.turn(s.id).agent?.reason ?? "the agent's turn ended in error");
        await this.d.sessions.close(s.id, SYSTEM, reason.slice(0, 1024)).catch(() => undefined);
      }
      w.usage = this.usage(s.id);
    } catch (err) {
      outcome = signal.aborted ? "cancelled" : "error";
      reason = err instanceof HutchError ? `${err.message}${err.hint ? ` (${err.hint})` : ""}` : String(err);
      if (!w.session) this.log(j, [emit(Events.errorRaised, { message: `worker ${w.n}: ${reason}`.slice(0, 65536), code: "worker" })]);
    }
    if (outcome === "cancelled") {
      w.status = "cancelled";
      this.save(j);
      return;
    }

    // The result is kept whatever the outcome: its snapshot and its diff against the base outlive the box.
    // null: not compared with the base, so which protected files to put back is unknown and it is not graded.
    let changes: SnapshotChange[] | null = null;
    if (this.d.boxes.find(w.box)) {
      try {
        const snap = await this.d.snapshots.create(w.box, `dispatch ${d.id} worker ${w.n}`, () => undefined, signal);
        w.snapshot = snap.snapshot.id;
        changes = (await this.d.snapshots.diff(d.snapshot!, w.snapshot)).changes;
        const diff = diffOf(changes, d.workdir);
        const file = join(dispatchDir(this.d.home, d.id), `w${w.n}.diff`);
        writeFileSync(file, diff.text, { mode: 0o600 });
        w.diff = file;
        w.diffstat = diff.stat;
      } catch (err) {
        logger.warn("could not keep a worker's result", { dispatch: d.id, worker: w.n, err });
      }
    }

    let verdict: NonNullable<DispatchWorker["verdict"]>;
    if (outcome === "ok" && w.snapshot && changes) {
      w.status = "grading";
      this.save(j);
      verdict = await this.grade(j, w, changes, timeoutMs, signal);
    } else {
      const v = outcome === "timeout" ? "timeout" : "error";
      const why = outcome === "ok" ? "the worker's result could not be kept or compared with the base; see the daemon's log" : reason;
      verdict = { verdict: v, exit: null, score: null, tail: why || "no result to grade", ms: 0 };
    }
    verdict.ms = Math.round(performance.now() - t0);
    w.verdict = verdict;
    w.finishedAt = new Date().toISOString();
    w.score = verdict.score;
    w.status = signal.aborted ? "cancelled" : (verdict.verdict as DispatchWorker["status"]);
    this.save(j);
    const event = emit(Events.verdictRecorded, {
      verdict: verdict.verdict,
      ...(verdict.score !== null ? { score: verdict.score } : {}),
      note: verdict.tail.slice(-4096),
      worker: w.n,
      agent: w.agent,
      box: w.box,
      ...(w.session ? { session: w.session } : {}),
      exit: verdict.exit,
      ms: verdict.ms,
      usage: w.usage,
    });
    this.log(j, [event]);
    if (w.session) {
      this.d.sessions.log(w.session, [{ ...event, actor: SYSTEM }]);
    }
  }

  /**
   * The check, in a fresh box with no network made from the base, into which
   * only the worker's work tree is copied, with the protected files put back
   * as the base had them. Nothing else of the worker's box comes over: not its
   * home (startup files a check would run: a `.pth`, a `.bashrc`, a tool early
   * on PATH), not /tmp, not a process it left running.
   */
  private async grade(
    j: Journal,
    w: DispatchWorker,
    changes: SnapshotChange[],
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<NonNullable<DispatchWorker["verdict"]>> {
    const d = j.dispatch;
    const name = w.box.replace(/-w(\d+)$/, "-g$1");
    this.claim(j, name);
    try {
      // No secrets and no allowed hosts: the box reaches nothing but its own loopback.
      await this.d.boxes.create({ name, from: d.snapshot!, start: true }, null, j.owner);
      const { channel } = this.d.boxes.channel(name);
      // The base's work tree is emptied first, so what the worker deleted stays deleted.
      await step(channel, `cd ${shq(d.workdir)} && rm -rf -- ./* ./.[!.]* ./..?*`, "emptying the base's work tree", signal);
      await this.d.snapshots.restore(
        { box: name, snapshot: w.snapshot!, paths: [workTree(d.workdir)], inPlace: true },
        () => undefined,
        signal,
      );
      const globs = protectGlobs(d.check, j.body.protect);
      const { restore, remove } = protectedChanges(changes, d.workdir, globs);
      if (restore.length)
        await this.d.snapshots.restore({ box: name, snapshot: d.snapshot!, paths: restore, inPlace: true }, () => undefined, signal);
      if (remove.length) await step(channel, `rm -rf -- ${remove.map(shq).join(" ")}`, "removing added protected files", signal);
      const r = await runCheck(channel, d.check, d.workdir, timeoutMs, signal);
      const restored = restore.length + remove.length;
      const tail = `${restored ? `(${restored} protected file${restored === 1 ? "" : "s"} restored from the base)\n` : ""}${r.tail}`;
      if (r.timedOut) return { verdict: "timeout", exit: null, score: null, tail: `${tail}\nthe check ran past the timeout`, ms: 0 };
      return { verdict: r.exit === 0 ? "passed" : "failed", exit: r.exit, score: parseScore(r.tail), tail, ms: 0 };
    } catch (err) {
      return {
        verdict: "error",
        exit: null,
        score: null,
        tail: `grading failed: ${err instanceof Error ? err.message : String(err)}`,
        ms: 0,
      };
    } finally {
      await this.deleteBox(j, name);
    }
  }

  private async waitTurn(session: string, timeoutMs: number, signal: AbortSignal): Promise<Outcome> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const t = this.d.sessions.summaries.turn(session);
      if (settled(t, true)) return turnOk(t) ? "ok" : "error";
      if (signal.aborted) return "cancelled";
      if (Date.now() >= deadline) return "timeout";
      await Bun.sleep(POLL_MS);
    }
  }

  /** Token totals from the worker's usage.reported events. */
  private usage(session: string): { input: number; output: number } {
    const total = { input: 0, output: 0 };
    const page = this.d.store.readText(session, 1, 100_000);
    for (const line of page.text ? page.text.split("\n") : []) {
      const u = read(JSON.parse(line) as SessionEvent, Events.usageReported);
      if (!u?.available) continue;
      total.input += u.input ?? 0;
      total.output += u.output ?? 0;
    }
    return total;
  }
}

const shq = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** A command that readies the grading box, run as the box's user; its failure fails the grading. */
async function step(channel: Channel, script: string, what: string, signal: AbortSignal): Promise<void> {
  const r = await runCheck(channel, script, "/", 60_000, signal);
  if (r.exit !== 0) throw new Error(`${what}: ${r.timedOut ? "timed out" : `exit ${r.exit}`}${r.tail ? `: ${r.tail.slice(-512)}` : ""}`);
}

/** first: the earliest to pass (by when its verdict was recorded); best: the highest score among those that passed, earliest on a tie. */
export function pick(workers: DispatchWorker[], how: "first" | "best"): DispatchWorker | null {
  const passed = workers.filter((w) => w.status === "passed" && w.verdict);
  const byTime = (a: DispatchWorker, b: DispatchWorker) => (a.finishedAt ?? "").localeCompare(b.finishedAt ?? "");
  if (how === "first") return passed.sort(byTime)[0] ?? null;
  return passed.sort((a, b) => (b.score ?? Number.NEGATIVE_INFINITY) - (a.score ?? Number.NEGATIVE_INFINITY) || byTime(a, b))[0] ?? null;
}

/** Runs fn over items, at most `limit` at once. */
async function pool<T>(items: T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  });
  await Promise.all(lanes);
}
