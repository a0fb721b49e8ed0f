// Sessions: the durable, ordered log of what happens in a box, and who may
// drive it. No HTTP here; controllers and the recorder call in.
import {
  BOX_REASON_MAX,
  checkEvent,
  emit,
  EVENT_TEXT_MAX,
  Events,
  HutchError,
  isEvent,
  newId,
  read,
  type Actor,
  type Anchor,
  type EventInput,
  type Session,
  type SessionCreateBody,
  type SessionForkBody,
  type SessionForkResult,
  type SessionInterruptResult,
  type SessionSummary,
  type TypedEvent,
} from "@hutch/shared";
import type { AppendOptions, SessionRow, SessionLog, NewEvent, SessionFields, PublishFn, SessionWriter } from "../store/types.ts";
import type { BoxService } from "../box/service.ts";
import { SessionBus } from "./bus.ts";
import { Recorder, type TerminalSpawner } from "./recorder.ts";
import { SessionSummaries } from "./summaries.ts";
import { SYSTEM, actorUser } from "../actors.ts";
import { sessionAccess, type SessionAccess } from "../actors.ts";
import { describeActor, DriverSlot, isStale, sameActor } from "./driver.ts";
import { harness, type Harness } from "../harness/index.ts";
import type { AgentRunner } from "../harness/run.ts";
import { WarmAgent, type WarmOptions } from "../harness/warm.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "sessions" });
/** Box states in which a box's processes end (or are about to): a warm agent in it is ended first. */
const LEAVING = new Set(["stopping", "stopped", "sleeping", "asleep", "failed", "deleted"]);
/** Checkpoints looked at, newest first, when forking a session (a log can hold any number a client appended). */
const FORK_SCAN = 1000;
/** Times a read-then-write (the driver slot) reads again after another server's write made what it read stale. */
const STALE_RETRIES = 8;

/** A text cut into pieces of at most `max` characters (a pasted block can be longer than one event holds), never inside a surrogate pair. */
export function pieces(text: string, max: number): string[] {
  const out: string[] = [];
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + max);
    if (end < text.length && /[\ud800-\udbff]/.test(text[end - 1]!)) end--;
    out.push(text.slice(at, end));
    at = end;
  }
  return out;
}

/** How sessions reach agents: the runner for headless turns, where the CLIs are, and how a terminal's agent starts. */
export interface SessionAgents {
  runner: AgentRunner;
  agentsDir: string;
  install: boolean;
  /** How an agent session's terminal starts (argv, env, cwd); null for a shell. */
  spawn: TerminalSpawner;
}

export class SessionService {
  readonly bus = new SessionBus();
  /** The daemon's own attachment to every open session's terminal. */
  readonly recorder: Recorder;
  /** Each session's turn and anchored annotations, folded as events are stored. */
  readonly summaries: SessionSummaries;
  /** Who drives each session (./driver.ts). */
  readonly driver: DriverSlot;
  /** Headless turns in flight, by session (one at a time), and how to stop each. */
  private readonly turns = new Map<string, { done: Promise<unknown>; stop: AbortController }>();
  /** Headless agents kept between prompts, by session (../harness/warm.ts). */
  private readonly warm = new Map<string, WarmAgent>();
  private lapseTimer?: ReturnType<typeof setInterval>;
  /** How writes are stored (SessionWriter in store/types.ts): the SQLite file alone, or a fleet's log with the file its replica. */
  readonly writer: SessionWriter;

  /** `writer`: made with where it publishes what it stores (this service's bus). */
  constructor(
    private readonly store: SessionLog,
    private readonly boxes: BoxService,
    private readonly agents: SessionAgents,
    writer: (publish: PublishFn) => SessionWriter,
  ) {
    this.writer = writer((id, seq, json, kind) => this.bus.publish(id, seq, json, kind));
    this.recorder = new Recorder(store, this, boxes, agents.spawn);
    this.summaries = new SessionSummaries(store);
    this.driver = new DriverSlot(
      (id, events, options) => this.append(id, events, options),
      (id, fields) => this.writer.update(id, fields),
    );
  }

  /** Starts the lease checker. */
  start(): void {
    let lapsing = false;
    this.lapseTimer = setInterval(() => {
      if (lapsing) return;
      lapsing = true;
      void this.driver
        .lapse(this.store.expiredLeases(Date.now()).filter((r) => this.mine(r)))
        .catch((err) => logger.warn("a lapsed driver slot was not freed", { err }))
        .finally(() => (lapsing = false));
    }, 250);
  }

  /**
   * Whether this server runs the session's box (and so its terminal, its
   * turns and its driver's lapses). Every session is this server's on one
   * machine; in a fleet, those of boxes in this server's registry.
   */
  mine(row: SessionRow): boolean {
    return !this.writer.shared || this.boxes.byId(row.box_id) !== null;
  }

  stop(): void {
    clearInterval(this.lapseTimer);
  }

  toSession(row: SessionRow): Session {
    const box = this.boxes.byId(row.box_id) ?? this.elsewhere(row.box_id);
    return {
      id: row.id,
      box: row.box_id,
      boxName: box?.name ?? "(deleted)",
      agent: row.agent,
      ...(row.label ? { label: row.label } : {}),
      state: row.state,
      owner: row.owner,
      ...(row.pty ? { pty: row.pty } : {}),
      ...(this.isHeadless(row) ? { headless: true } : {}),
      ...(row.driver
        ? {
            driver: {
              actor: JSON.parse(row.driver) as Actor,
              ...(row.driver_lease_ms ? { leaseMs: row.driver_lease_ms } : {}),
              ...(row.driver_expires_at ? { expiresAt: new Date(row.driver_expires_at).toISOString() } : {}),
            },
          }
        : {}),
      lastSeq: row.last_seq,
      createdAt: row.created_at,
      ...(row.closed_at ? { closedAt: row.closed_at } : {}),
    };
  }

  /** Logs a box's state change in every open session bound to it. */
  boxChanged(boxId: string, state: string, reason: string | null): void {
    if (LEAVING.has(state)) for (const row of this.store.list({ boxId, state: "open" })) void this.warm.get(row.id)?.end();
    // A failed box's reason carries its console's last lines, which may be longer than an event holds.
    this.boxEvent(
      boxId,
      emit(Events.boxStateChanged, { box: boxId, state, ...(reason ? { reason: reason.slice(0, BOX_REASON_MAX) } : {}) }),
    );
  }

  /** Logs a daemon event about a box into every open session bound to it. */
  boxEvent(boxId: string, event: TypedEvent): void {
    for (const row of this.store.list({ boxId, state: "open" })) this.log(row.id, [{ ...event, actor: SYSTEM }]);
  }

  /**
   * What a user may do with a box: its owner's, shared to drive or to read,
   * or nothing (null). Server mode wires this to box owners and shares;
   * unwired, a session is its opener's alone.
   */
  boxAccess?: (boxId: string, user: string) => SessionAccess | null;
  /**
   * Refuses an agent that could not reach its model (no secret stored for a
   * binding it needs), before a box or a session is made. `box` is the box
   * named in the request, if any (its owner's secrets are the ones used).
   */
  agentReady: (agent: string, bindings: readonly string[], user: string, box?: string) => void = () => {};
  /** Holds a box awake while a headless turn runs in it (box/idle.ts); the function returned ends the hold. */
  holdBox: (boxId: string) => () => void = () => () => {};
  /** In a fleet: a box another server runs, by id or name (fleet/boxes.ts), for its name and for filters. */
  elsewhere: (ref: string) => { id: string; name: string } | undefined = () => undefined;
  /** Whom a box belongs to (server mode): a fork of a session belongs to its box's owner. */
  boxOwner: (boxId: string) => string | undefined = () => undefined;

  /** What the actor may do with the session now (see access.ts), or null when it may not see it. */
  accessOf(row: SessionRow, actor: Actor): SessionAccess | null {
    if (actor.kind === "system") return "own";
    const user = actorUser(actor);
    if (!this.boxAccess) return user === row.owner ? "own" : null;
    return sessionAccess(user, row.owner, this.boxAccess(row.box_id, user), () => this.boxes.byId(row.box_id) !== null);
  }

  /** A session the actor may see and what it may do with it, or a named error: another user's is answered as missing, so ids do not leak. */
  private seen(id: string, actor: Actor): { row: SessionRow; access: SessionAccess } {
    const row = this.store.get(id);
    const access = row ? this.accessOf(row, actor) : null;
    if (!row || access === null) throw new HutchError("not_found", `no session "${id}"`, "list sessions: hutch session list");
    return { row, access };
  }

  /** A session the actor may see, or a named error (see seen). */
  row(id: string, actor: Actor): SessionRow {
    return this.seen(id, actor).row;
  }

  /** A session the actor may act on (type into, drive, fork, close): not one whose box it may only watch. */
  private drivable(id: string, actor: Actor): SessionRow {
    const { row, access } = this.seen(id, actor);
    if (access === "read")
      throw new HutchError(
        "denied",
        `session ${id} is on a box shared with you read-only`,
        "watch and annotate it; ask its owner to share the box with --drive",
      );
    return row;
  }

  get(id: string, actor: Actor): Session {
    return this.toSession(this.row(id, actor));
  }

  list(actor: Actor, filter: { box?: string; state?: string } = {}): Session[] {
    const boxId = filter.box
      ? (this.boxes.find(filter.box)?.id ?? this.elsewhere(filter.box)?.id ?? this.boxes.get(filter.box).id)
      : undefined;
    return this.store
      .list({ boxId, state: filter.state })
      .filter((r) => this.accessOf(r, actor) !== null)
      .map((r) => this.toSession(r));
  }

  summary(id: string, actor: Actor): SessionSummary {
    return this.summaries.of(this.get(id, actor));
  }

  summaryList(actor: Actor, filter: { box?: string; state?: string } = {}): SessionSummary[] {
    return this.list(actor, filter).map((s) => this.summaries.of(s));
  }

  /** `first`: events the caller logs as the actor right after session.created, before the prompt (a schedule's run.started). */
  async create(body: SessionCreateBody, actor: Actor, first: TypedEvent[] = []): Promise<Session> {
    const agent = harness(body.agent ?? "shell");
    const headless = body.prompt !== undefined || body.headless === true;
    const ask = body.permissions === "ask";
    // Made headless with no prompt, a session is prompted turn after turn (an editor's): its agent is kept between
    // prompts where its harness can. A run made with its prompt is waited on to its process's exit, so it keeps one per prompt.
    const warm = headless && body.prompt === undefined && !ask && agent.warm !== undefined;
    if (ask && !headless)
      throw new HutchError(
        "invalid",
        "--permissions ask is for headless turns: in a terminal the agent runs with its prompts off (the box is the sandbox)",
        "give it a prompt (hutch run --agent claude --permissions ask --prompt TEXT)",
      );
    if (ask && !agent.asksPermission)
      throw new HutchError(
        "invalid",
        `${agent.name} cannot ask a person before its tool calls through hutch yet (claude and codex can)`,
        `run ${agent.name} without --permissions ask, or use --agent claude or --agent codex`,
      );
    if (agent.bindings.length) this.agentReady(agent.name, agent.bindings, actorUser(actor), body.box);
    // A new box for an agent gets the agent's bindings and egress; an existing box keeps its own policy.
    const box = body.box
      ? await this.boxes.ensureRunning(body.box)
      : await this.boxes.create(
          {
            name: `run-${newId("ses").slice(-6)}`,
            start: true,
            ...(agent.bindings.length ? { secrets: agent.bindings } : {}),
            ...(agent.egress.length ? { allow: agent.egress } : {}),
          },
          null,
          actorUser(actor),
        );
    // A headless session has no terminal (argv []); an agent's terminal argv is settled when it opens (Recorder's spawn hook).
    const argv = headless ? [] : (body.argv ?? (agent.name === "shell" ? ["bash", "-l"] : [agent.name]));
    const id = newId("ses");
    await this.writer.insert({
      id,
      box_id: box.id,
      agent: agent.name,
      label: body.label ?? null,
      state: "open",
      owner: actorUser(actor),
      argv: JSON.stringify(argv),
      pty: null,
      created_at: new Date().toISOString(),
    });
    await this.append(id, [
      {
        ...emit(Events.sessionCreated, {
          box: box.id,
          agent: agent.name,
          ...(body.label ? { label: body.label } : {}),
          ...(ask ? { permissions: "ask" as const } : {}),
          ...(warm ? { warm: true as const } : {}),
        }),
        actor,
      },
      ...first.map((e) => ({ ...e, actor })),
    ]);
    if (body.prompt !== undefined) {
      await this.append(id, [{ ...emit(Events.inputSent, { text: body.prompt }), actor }]);
      this.startTurn(this.store.get(id)!, agent, body.prompt, false, body.model, ask);
    } else if (warm) {
      // Started now and ready when this answers, as the Agent SDK's session is: the first prompt meets a warm agent.
      await this.warmAgent(id, this.turnOptions(this.store.get(id)!, agent, body.model)).warmUp();
    } else if (!headless) {
      await this.recorder.ensurePty(this.store.get(id)!, { cols: body.cols ?? 80, rows: body.rows ?? 24 });
    }
    logger.info("session created", { session: id, box: box.name, agent: agent.name, headless });
    return this.toSession(this.store.get(id)!);
  }

  /** A headless session runs its agent once per input, never in a terminal. */
  isHeadless(row: SessionRow): boolean {
    return row.argv === "[]";
  }

  /**
   * After a daemon restart: a headless turn that was running then has lost
   * its agent (the guest stops a piped process whose client is gone). Each
   * one is ended in the log, so waiters and readers learn it will not finish.
   */
  recoverTurns(): void {
    for (const row of this.store.list({ state: "open" })) {
      if (!this.isHeadless(row) || this.turns.has(row.id) || !this.mine(row)) continue;
      const turn = this.summaries.turn(row.id);
      if (turn.input <= turn.attention) {
        // A warm agent waiting for its next prompt went with the daemon too; the next prompt starts another.
        if (turn.warm !== undefined && turn.warm === turn.started && turn.started > turn.exited)
          this.log(row.id, [{ ...emit(Events.execExited, { code: null, signal: "lost" }), actor: SYSTEM }]);
        continue;
      }
      const reason = "the daemon stopped during this turn, and the agent with it; send the prompt again to retry";
      const lost = [
        ...(turn.started > turn.exited ? [emit(Events.execExited, { code: null, signal: "lost" })] : []),
        emit(Events.errorRaised, { message: reason, code: "agent-lost" }),
        emit(Events.agentState, { state: "error", reason }),
        emit(Events.attentionRequired, { reason }),
      ];
      this.log(
        row.id,
        lost.map((e) => ({ ...e, actor: SYSTEM })),
      );
      logger.warn("a headless turn was lost to a daemon restart", { session: row.id });
    }
  }

  /** Whether a headless turn is running now. */
  busy(id: string): boolean {
    return this.turns.has(id);
  }

  /** Stops a headless turn in flight the way its agent wants, and returns when it has ended; nothing when none runs. */
  async stopTurn(id: string): Promise<void> {
    const turn = this.turns.get(id);
    if (!turn) return;
    turn.stop.abort();
    await turn.done;
  }

  /** How the session was made to run its turns (its session.created says so, for every turn): asking before tool calls, warm. */
  private mode(id: string): { ask: boolean; warm: boolean } {
    const created = this.store.summaries.eventsOf(id, [Events.sessionCreated.kind])[0];
    const d = created ? read(created, Events.sessionCreated) : null;
    return { ask: d?.permissions === "ask", warm: d?.warm === true };
  }

  private startTurn(row: SessionRow, agent: Harness, prompt: string, resume: boolean, model?: string, ask = false, warm = false): void {
    const { runner } = this.agents;
    const stop = new AbortController();
    const release = this.holdBox(row.box_id);
    const o = this.turnOptions(row, agent, model);
    const turn = warm
      ? this.warmAgent(row.id, o).prompt(prompt, resume, stop.signal)
      : runner.run({ ...o, prompt, resume, ...(ask ? { permissions: "ask" as const } : {}), signal: stop.signal });
    const done = turn
      .catch((err) => logger.error("agent turn failed", { session: row.id, err }))
      .finally(() => {
        this.turns.delete(row.id);
        release();
      });
    this.turns.set(row.id, { done, stop });
  }

  /** What running the session's agent needs: its box, harness, actor, log and the agent CLIs. */
  private turnOptions(row: SessionRow, agent: Harness, model?: string): WarmOptions {
    const { agentsDir, install } = this.agents;
    return {
      boxId: row.box_id,
      harness: agent,
      ...(model ? { model } : {}),
      actor: { kind: "agent" as const, id: `${row.owner}/agent:${agent.name}` },
      sink: { append: (events: NewEvent[]) => this.log(row.id, events) },
      agentsDir,
      install,
    };
  }

  /** The session's warm agent: the one running, or a new one that starts its process with the next prompt. */
  private warmAgent(id: string, o: WarmOptions): WarmAgent {
    const live = this.warm.get(id);
    if (live?.usable) return live;
    const w = new WarmAgent(this.agents.runner, o);
    this.warm.set(id, w);
    void w.gone.then(() => {
      if (this.warm.get(id) === w) this.warm.delete(id);
    });
    return w;
  }

  /**
   * Appends events and publishes them live. The only way anything enters a
   * log, so every event is checked against the registry here, the daemon's
   * own as much as clients': one that does not fit refuses the whole batch.
   */
  async append(sessionId: string, events: NewEvent[], options?: AppendOptions): Promise<number[]> {
    return (await this.commit(sessionId, events, options)).map((r) => r.seq);
  }

  /**
   * Appends without waiting, for the daemon's own events (a box's state, a
   * terminal's output): the write is made in call order, and a failure is
   * logged here rather than thrown at a caller that is not waiting.
   */
  log(sessionId: string, events: NewEvent[]): void {
    this.commit(sessionId, events).catch((err) =>
      logger.error("an event was not logged", { session: sessionId, kinds: events.map((e) => e.kind).join(","), err }),
    );
  }

  /** The one way to the writer: checks every event first (the whole batch is refused, nothing written, when one does not fit). */
  private commit(sessionId: string, events: NewEvent[], options?: AppendOptions): Promise<{ seq: number; fresh: boolean }[]> {
    for (const [i, e] of events.entries()) {
      const problem = checkEvent(e.kind, e.data);
      if (problem) {
        logger.error("refused an event the daemon wrote", { session: sessionId, kind: e.kind, problem });
        return Promise.reject(
          new HutchError(
            "failed",
            `${events.length > 1 ? `events.${i}.` : ""}${e.kind}: ${problem}`,
            "this is a bug in hutch; the event was not logged",
          ),
        );
      }
    }
    return this.writer.append(sessionId, events, options);
  }

  /**
   * Runs a read-then-write again, from a fresh read, while another server's
   * write made what it read stale (its `ifLast` refused): the driver slot is
   * decided on the row as the log has it, never on a copy behind it.
   */
  private async reread<T>(attempt: () => Promise<T>): Promise<T> {
    for (let i = 0; ; i++) {
      try {
        return await attempt();
      } catch (err) {
        if (!isStale(err) || i >= STALE_RETRIES) throw err;
        await this.writer.fresh();
      }
    }
  }

  /** Client-written events: checked against the registry, actor stamped here. */
  async appendFromClient(id: string, actor: Actor, inputs: EventInput[]): Promise<number[]> {
    // In a fleet a session made through another server a moment ago may not be in this replica yet: catch up before "no session".
    if (this.writer.shared && !this.store.get(id)) await this.writer.fresh();
    // Whoever may see a session may annotate it; anything else is the drivers'.
    const row = inputs.every((e) => e.kind === Events.annotationAdded.kind) ? this.row(id, actor) : this.drivable(id, actor);
    this.requireOpen(row);
    const events = inputs.map((e, i): NewEvent => {
      if (!isEvent(e, "client")) {
        const problem = checkEvent(e.kind, e.data, "client")!;
        throw new HutchError("invalid", inputs.length > 1 ? `events.${i}.${problem}` : problem, "see the event kinds: GET /v1/event-kinds");
      }
      return { ...e, actor };
    });
    return this.append(id, events);
  }

  async annotate(id: string, actor: Actor, text: string, anchor: Anchor | undefined, key?: string): Promise<number> {
    const [seq] = await this.appendFromClient(id, actor, [
      { ...emit(Events.annotationAdded, { text, ...(anchor ? { anchor } : {}) }), ...(key ? { idempotencyKey: key } : {}) },
    ]);
    return seq!;
  }

  /** Input from the driver: logged, then typed into the session's terminal. */
  async input(id: string, actor: Actor, text: string, key?: string): Promise<number> {
    const row = this.drivable(id, actor);
    this.requireOpen(row);
    this.requireMine(row);
    this.driver.require(row, actor);
    const headless = this.isHeadless(row);
    if (headless && this.turns.has(id)) {
      throw new HutchError(
        "conflict",
        `the agent in session ${id} is still working on its turn`,
        `wait for it: hutch session wait ${id} --idle`,
      );
    }
    // A session made headless with no prompt (an editor's) has had no turn before its first input.
    const resume = this.summaries.turn(id).input > 0;
    const [seq] = await this.commit(id, [{ ...emit(Events.inputSent, { text }), actor, ...(key ? { idempotencyKey: key } : {}) }]);
    if (seq!.fresh) {
      // A follow-up prompt continues the conversation the session's earlier turns had.
      if (headless) {
        const { ask, warm } = this.mode(row.id);
        this.startTurn(row, harness(row.agent), text.replace(/\n$/, ""), resume, undefined, ask, warm);
      } else await this.recorder.write(row, new TextEncoder().encode(text));
    }
    return seq!.seq;
  }

  /**
   * The driver stops the agent's turn (an editor's Stop, ACP's
   * session/cancel): a headless turn's agent gets its harness's stop signal
   * (then a kill after the grace period), and this returns once the turn has
   * ended in the log, so what the caller reads next includes how it ended.
   * Nothing running is not an error: `interrupted` says whether there was.
   */
  async interrupt(id: string, actor: Actor): Promise<SessionInterruptResult> {
    const row = this.drivable(id, actor);
    this.requireOpen(row);
    this.driver.require(row, actor);
    const turn = this.turns.get(id);
    if (!turn) return { interrupted: false };
    logger.info("turn interrupted", { session: id, by: actor.id });
    // Who stopped it, before how it ended: readers show a stopped turn, not only the agent's error.
    await this.append(id, [{ ...emit(Events.turnInterrupted, {}), actor }]);
    turn.stop.abort();
    await turn.done;
    return { interrupted: true };
  }

  /**
   * A client attaches its terminal: it takes the driver slot (refused while
   * someone else drives, unless it steals), the session's terminal is started
   * if it is not running, what it types is logged, and leaving gives the slot
   * back.
   */
  async attach(id: string, actor: Actor, steal: boolean) {
    const row = this.drivable(id, actor);
    this.requireOpen(row);
    this.requireMine(row);
    if (this.isHeadless(row)) {
      throw new HutchError(
        "conflict",
        `session ${id} runs its agent headless: it has no terminal to attach to`,
        `watch it: hutch session watch ${id}, or send the next prompt: hutch session send ${id} TEXT`,
      );
    }
    if (steal) await this.steal(id, actor);
    else await this.acquire(id, actor);
    const live = await this.recorder.ensurePty(this.store.get(id)!, { cols: 80, rows: 24 });
    const decoder = new TextDecoder();
    return {
      box: row.box_id,
      pty: live.pty,
      input: (bytes: Uint8Array) =>
        this.log(
          id,
          pieces(decoder.decode(bytes, { stream: true }), EVENT_TEXT_MAX).map((text) => ({ ...emit(Events.inputSent, { text }), actor })),
        ),
      end: () => {
        const now = this.store.get(id);
        if (now?.state === "open" && now.driver && sameActor(JSON.parse(now.driver) as Actor, actor))
          this.release(id, actor).catch((err) =>
            logger.warn("a detached terminal's driver slot was not handed back", { session: id, err }),
          );
      },
    };
  }

  async acquire(id: string, actor: Actor, leaseMs?: number): Promise<Session> {
    await this.reread(() => {
      const row = this.drivable(id, actor);
      this.requireOpen(row);
      return this.driver.acquire(row, actor, leaseMs);
    });
    return this.get(id, actor);
  }

  async release(id: string, actor: Actor): Promise<Session> {
    await this.reread(async () => {
      const row = this.row(id, actor);
      if (this.driver.of(row)) await this.driver.release(row, actor);
    });
    return this.get(id, actor);
  }

  async steal(id: string, actor: Actor, leaseMs?: number): Promise<Session> {
    await this.reread(() => {
      const row = this.drivable(id, actor);
      this.requireOpen(row);
      return this.driver.steal(row, actor, leaseMs);
    });
    return this.get(id, actor);
  }

  async heartbeat(id: string, actor: Actor): Promise<Session> {
    await this.driver.heartbeat(this.drivable(id, actor), actor);
    return this.get(id, actor);
  }

  /**
   * A new box from the checkpoint at or before `at` in this session's log,
   * and a new session of the same agent in it. Only checkpoints the daemon
   * wrote count (clients may append checkpoint.created too, naming any
   * snapshot), and only with a snapshot of this session's own box.
   */
  async fork(id: string, actor: Actor, body: SessionForkBody): Promise<SessionForkResult> {
    // A fork holds a copy of the box's files: a read-only share may watch the session, not take its files.
    const row = this.drivable(id, actor);
    const seeder = this.boxes.seeder;
    if (!seeder) throw new HutchError("invalid", "this daemon cannot fork from snapshots", "start a new session: hutch run");
    let found: { seq: number; snapshot: string } | undefined;
    for (const e of this.store.kindBefore(id, Events.checkpointCreated.kind, body.at, FORK_SCAN)) {
      const who = JSON.parse(e.actor) as Actor;
      const data = JSON.parse(e.data) as { snapshot?: unknown };
      if (who.kind !== "system" || typeof data.snapshot !== "string") continue;
      const { box } = await seeder.check(data.snapshot).catch(() => ({ box: "" }));
      if (box === row.box_id) {
        found = { seq: e.seq, snapshot: data.snapshot };
        break;
      }
    }
    if (!found)
      throw new HutchError(
        "not_found",
        `session ${id} has no checkpoint of its box at or before seq ${body.at}`,
        `take one: hutch snapshot create ${this.boxes.byId(row.box_id)?.name ?? row.box_id}`,
      );
    const old = this.boxes.byId(row.box_id);
    const name = body.name ?? this.forkName(old?.name ?? "box");
    const box = await this.boxes.create(
      { name, engine: old?.engine ?? "process", from: found.snapshot, start: true },
      null,
      this.boxOwner(row.box_id),
    );
    const session = await this.create({ box: box.id, agent: harness(row.agent).name, ...(body.label ? { label: body.label } : {}) }, actor);
    logger.info("session forked", { from: id, seq: found.seq, snapshot: found.snapshot, box: box.name, session: session.id });
    return { checkpoint: found.seq, snapshot: found.snapshot, box, session };
  }

  private forkName(base: string): string {
    const stem = base.replace(/-fork-\d+$/, "").slice(0, 50);
    for (let n = 1; ; n++) {
      const name = `${stem}-fork-${n}`;
      if (!this.boxes.list().some((b) => b.name === name)) return name;
    }
  }

  async close(id: string, actor: Actor, reason?: string): Promise<Session> {
    const row = this.drivable(id, actor);
    if (row.state === "closed") return this.toSession(row);
    // A headless turn in flight is stopped the way its agent wants, and ends before the session does.
    await this.stopTurn(id);
    await this.warm.get(id)?.end();
    await this.recorder.stop(row);
    const closed: SessionFields = {
      state: "closed",
      closed_at: new Date().toISOString(),
      driver: null,
      driver_lease_ms: null,
      driver_expires_at: null,
    };
    await this.append(id, [{ ...emit(Events.sessionClosed, reason ? { reason } : {}), actor }], { fields: closed });
    return this.get(id, actor);
  }

  /**
   * A user's share of a box narrowed to read or was withdrawn: a driver slot
   * any of their clients holds on the box's sessions is handed back at once
   * (logged as the daemon's), and when the share ended, the sessions they
   * opened on the box are closed. Their calls are refused from the moment
   * the share changed (accessOf decides at every call); this ends what was
   * already under way.
   */
  async accessNarrowed(boxId: string, user: string, now: SessionAccess | null): Promise<void> {
    for (const row of this.store.list({ boxId, state: "open" })) {
      const driver = this.driver.of(row);
      if (driver && actorUser(driver) === user) await this.driver.revoke(row, driver);
      if (now === null && row.owner === user) await this.close(row.id, SYSTEM, `${user}'s access to the box was withdrawn`);
    }
  }

  /**
   * Input into a box's desktop or browser from a client of the daemon: the
   * session's driver is its one input owner. While an open session of the box
   * has a driver, anyone else is refused, unless it steals the slot (logged,
   * as any steal). Returns whether the caller drives one: its input then
   * takes the guest's own input slot from whoever held it (the session's
   * agent, from inside the box).
   */
  async boxInput(boxId: string, actor: Actor, steal: boolean): Promise<{ driving: boolean }> {
    let driving = false;
    for (const row of this.store.list({ boxId, state: "open" })) {
      const current = this.driver.of(row);
      if (!current) continue;
      if (!sameActor(current, actor)) {
        if (!steal)
          throw new HutchError(
            "conflict",
            `session ${row.id} is driven by ${describeActor(current)}; only the driver sends input to box ${row.box_id}'s desktop and browser`,
            `take it over: hutch session driver steal ${row.id} (or pass --steal)`,
            { driver: current },
          );
        await this.steal(row.id, actor);
      }
      driving = true;
    }
    return { driving };
  }

  /** Refuses what only the server running the session's box can do (its terminal, its turns), naming where to go. */
  private requireMine(row: SessionRow): void {
    if (!this.mine(row))
      throw new HutchError(
        "conflict",
        `session ${row.id}'s box runs on another server of this fleet`,
        "drive it through the server that runs its box (watching and annotating work from any server)",
      );
  }

  private requireOpen(row: SessionRow): void {
    if (row.state !== "open") throw new HutchError("conflict", `session ${row.id} is closed`, "start a new one: hutch run");
  }
}
