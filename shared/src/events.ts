// The session event vocabulary: every kind registered once, with its schema
// (opencode's BusEvent.define). The daemon refuses events that do not match,
// and a new kind is added here, nowhere else, so producers and readers share
// one schema for it.
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { check, firstError } from "./validate.ts";
import { Actor } from "./actor.ts";
import { APPROVAL_REASON_MAX, APPROVAL_SUMMARY_MAX, ApprovalDigest, ApprovalId, ApprovalKind, ApprovalOutcome } from "./approvals.ts";

export { Actor, ActorKind } from "./actor.ts";

interface Registered {
  data: TSchema;
  /** Clients may append it through the API; otherwise only the daemon writes it. */
  byClients: boolean;
}
const registry = new Map<string, Registered>();

/** A registered kind: its dotted name and the schema of its data. Producers and readers name kinds by these, never by string. */
export interface EventDef<K extends string = string, T extends TSchema = TSchema> {
  readonly kind: K;
  readonly data: T;
}

/** Registers an event kind with the schema of its data. Kinds are dotted: `box.state.changed`. */
export function defineEvent<K extends string, T extends TSchema>(kind: K, data: T, opts: { byClients?: boolean } = {}): EventDef<K, T> {
  if (!/^[a-z]+(\.[a-z]+)+$/.test(kind)) throw new Error(`event kind "${kind}" is not dotted lower case`);
  if (registry.has(kind)) throw new Error(`event kind "${kind}" is registered twice`);
  registry.set(kind, { data, byClients: opts.byClients ?? false });
  return { kind, data };
}

export function eventKinds(): string[] {
  return [...registry.keys()].sort();
}

/** null when the data fits its kind; else what is wrong, naming the field. */
export function checkEvent(kind: string, data: unknown, from: "client" | "daemon" = "daemon"): string | null {
  const entry = registry.get(kind);
  if (!entry) return `kind: unknown event kind "${kind}"`;
  if (from === "client" && !entry.byClients) return `kind: "${kind}" is written by the daemon, not by clients`;
  if (check(entry.data, data)) return null;
  return `data.${firstError(entry.data, data)}`;
}

/** The longest text one event holds (a message, a tool's output, typed input); producers cut or split longer ones. */
export const EVENT_TEXT_MAX = 65536;
/** The longest reason a box.state.changed holds (a failed box's carries its console's last lines). */
export const BOX_REASON_MAX = 4096;

const Text = (max = EVENT_TEXT_MAX) => Type.String({ maxLength: max });
const Seq = Type.Integer({ minimum: 1 });

const EgressData = Type.Object({
  box: Type.String(),
  host: Text(262),
  port: Type.Integer({ minimum: 0, maximum: 65535 }),
  method: Type.Optional(Text(16)),
  path: Type.Optional(Text(1024)),
  binding: Type.Optional(Text(64)),
  status: Type.Optional(Type.Integer()),
  reason: Type.Optional(Text(1024)),
  bytesUp: Type.Integer({ minimum: 0 }),
  bytesDown: Type.Integer({ minimum: 0 }),
  ms: Type.Integer({ minimum: 0 }),
});

export const Anchor = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: 4096 }),
    line: Type.Optional(Type.Integer({ minimum: 1 })),
    seq: Type.Optional(Seq),
  },
  { additionalProperties: false },
);
export type Anchor = Static<typeof Anchor>;

const MessageRole = Type.Union([Type.Literal("assistant"), Type.Literal("user"), Type.Literal("reasoning")]);
const TokenCount = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);

export const Events = {
  sessionCreated: defineEvent(
    "session.created",
    Type.Object({
      box: Type.String(),
      agent: Type.String(),
      label: Type.Optional(Text(256)),
      pty: Type.Optional(Type.String()),
      /** The agent asks a person (hutch approvals) before each tool call its own permission check holds. */
      permissions: Type.Optional(Type.Literal("ask")),
      /** A headless session prompted turn after turn (an editor's): its agent's process is kept between prompts where its harness can. */
      warm: Type.Optional(Type.Literal(true)),
    }),
  ),
  sessionClosed: defineEvent("session.closed", Type.Object({ reason: Type.Optional(Text(1024)) })),
  boxStateChanged: defineEvent(
    "box.state.changed",
    Type.Object({ box: Type.String(), state: Type.String(), reason: Type.Optional(Text(BOX_REASON_MAX)) }),
  ),
  /** The box went to sleep: what its sleep kept ("disk": its programs were stopped), the bytes of its state, who asked. */
  boxSlept: defineEvent(
    "box.slept",
    Type.Object({
      box: Type.String(),
      keeps: Type.Union([Type.Literal("memory"), Type.Literal("disk")]),
      programsStopped: Type.Boolean(),
      bytes: Type.Integer({ minimum: 0 }),
      ms: Type.Integer({ minimum: 0 }),
      by: Type.Optional(Actor),
    }),
  ),
  /** The box woke from sleep with its programs (or, after a disk-only sleep, booted again), and who asked. */
  boxWoke: defineEvent(
    "box.woke",
    Type.Object({ box: Type.String(), ms: Type.Integer({ minimum: 0 }), programsKept: Type.Boolean(), by: Type.Optional(Actor) }),
  ),
  /**
   * The box runs on another server of the fleet now: moved there (`box move`,
   * `node drain`) or made again there when its server died (failover), from
   * the snapshot named; `programsKept`: its processes carried on (a VM's
   * sleeping state carried), or they were started afresh from its files.
   */
  boxMoved: defineEvent(
    "box.moved",
    Type.Object({
      box: Type.String(),
      from: Type.String({ maxLength: 64 }),
      to: Type.String({ maxLength: 64 }),
      reason: Type.Union([Type.Literal("move"), Type.Literal("drain"), Type.Literal("failover")]),
      snapshot: Type.Optional(Type.String({ maxLength: 64 })),
      programsKept: Type.Boolean(),
      epoch: Type.Integer({ minimum: 1 }),
      by: Type.Optional(Actor),
    }),
  ),
  /** A wake found its sleeping state torn or missing and booted the box afresh from its disk: its programs are gone. */
  boxWokeCold: defineEvent("box.woke.cold", Type.Object({ box: Type.String(), reason: Text(1024) })),
  inputSent: defineEvent("input.sent", Type.Object({ text: Text() })),
  outputAppended: defineEvent(
    "output.appended",
    Type.Object({
      /** Where the bytes are: chunk n of the session's PTY store, byte range within it. */
      chunk: Type.Integer({ minimum: 0 }),
      offset: Type.Integer({ minimum: 0 }),
      length: Type.Integer({ minimum: 0 }),
      /** The bytes are a screen redraw taken at (re)attach, not new output. */
      snapshot: Type.Optional(Type.Boolean()),
    }),
  ),
  /**
   * The oldest stored output of the session was dropped to keep it under a
   * cap: chunks fromChunk..toChunk (their output.appended events stay, their
   * bytes are gone), `bytes` bytes from byte `offset` of the session's output.
   * One event per trim, each trim making room for an eighth of the cap.
   */
  outputDropped: defineEvent(
    "output.dropped",
    Type.Object({
      fromChunk: Type.Integer({ minimum: 0 }),
      toChunk: Type.Integer({ minimum: 0 }),
      offset: Type.Integer({ minimum: 0 }),
      bytes: Type.Integer({ minimum: 1 }),
      /** Which cap made room (the session's own, its box's total, its owner's total) and that cap in bytes. */
      cap: Type.Union([Type.Literal("session"), Type.Literal("box"), Type.Literal("user")]),
      limit: Type.Integer({ minimum: 0 }),
    }),
  ),
  execStarted: defineEvent(
    "exec.started",
    Type.Object({
      argv: Type.Array(Type.String()),
      pid: Type.Optional(Type.Integer()),
      /** A headless agent kept running between the session's prompts: its turns end at attention.required, not at its exit. */
      warm: Type.Optional(Type.Literal(true)),
    }),
  ),
  execExited: defineEvent(
    "exec.exited",
    Type.Object({ code: Type.Union([Type.Integer(), Type.Null()]), signal: Type.Union([Type.String(), Type.Null()]) }),
  ),
  annotationAdded: defineEvent(
    "annotation.added",
    Type.Object({ text: Text(), anchor: Type.Optional(Anchor) }, { additionalProperties: false }),
    { byClients: true },
  ),
  driverAcquired: defineEvent(
    "session.driver.acquired",
    Type.Object({ driver: Actor, leaseMs: Type.Optional(Type.Integer({ minimum: 1 })) }),
  ),
  driverReleased: defineEvent("session.driver.released", Type.Object({ driver: Actor })),
  driverStolen: defineEvent("session.driver.stolen", Type.Object({ from: Actor, to: Actor })),
  driverLapsed: defineEvent("session.driver.lapsed", Type.Object({ driver: Actor })),
  /** A point to come back to; the daemon's carry the snapshot of the box taken there (`hutch snapshot create`). */
  checkpointCreated: defineEvent(
    "checkpoint.created",
    Type.Object({
      name: Text(256),
      ref: Type.Optional(Text(1024)),
      snapshot: Type.Optional(
        Type.String({ pattern: "^snap_[0-9a-z]{20}$", rule: "a snapshot id: snap_ and 20 lowercase letters or digits" }),
      ),
    }),
    { byClients: true },
  ),
  verdictRecorded: defineEvent(
    "verdict.recorded",
    Type.Object({
      verdict: Text(64),
      score: Type.Optional(Type.Number()),
      note: Type.Optional(Text()),
      // A dispatch's grade of one worker (host/src/dispatch): which worker, the check's exit and how long it all took.
      worker: Type.Optional(Type.Integer({ minimum: 1 })),
      agent: Type.Optional(Text(64)),
      box: Type.Optional(Text(128)),
      session: Type.Optional(Text(64)),
      exit: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
      ms: Type.Optional(Type.Integer({ minimum: 0 })),
      usage: Type.Optional(Type.Object({ input: Type.Integer({ minimum: 0 }), output: Type.Integer({ minimum: 0 }) })),
    }),
    { byClients: true },
  ),
  // `hutch dispatch`: the orchestration session's own log of a dispatch (host/src/dispatch).
  dispatchStarted: defineEvent(
    "dispatch.started",
    Type.Object({ dispatch: Text(64), snapshot: Text(64), k: Type.Integer({ minimum: 1 }), check: Text(4096), task: Text() }),
  ),
  dispatchWorkerStarted: defineEvent(
    "dispatch.worker.started",
    Type.Object({ worker: Type.Integer({ minimum: 1 }), agent: Text(64), box: Text(128), session: Type.Optional(Text(64)) }),
  ),
  dispatchFinished: defineEvent(
    "dispatch.finished",
    Type.Object({
      status: Type.Union([Type.Literal("done"), Type.Literal("cancelled"), Type.Literal("interrupted"), Type.Literal("failed")]),
      winner: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
      reason: Type.Optional(Text(4096)),
      usage: Type.Object({ input: Type.Integer({ minimum: 0 }), output: Type.Integer({ minimum: 0 }) }),
    }),
  ),
  // `hutch schedule` (host/src/schedule): a run's start and end, in the run's own session, written as the schedule.
  scheduleRunStarted: defineEvent(
    "schedule.run.started",
    Type.Object({
      schedule: Text(64),
      trigger: Type.Union([Type.Literal("cron"), Type.Literal("at"), Type.Literal("manual"), Type.Literal("catch-up")]),
      box: Text(128),
      agent: Text(64),
      /** Whether the run had to wake (or start) the box, and how long that took. */
      woke: Type.Boolean(),
      wakeMs: Type.Integer({ minimum: 0 }),
    }),
  ),
  scheduleRunFinished: defineEvent(
    "schedule.run.finished",
    Type.Object({
      schedule: Text(64),
      status: Type.Union([Type.Literal("ok"), Type.Literal("error"), Type.Literal("timeout"), Type.Literal("interrupted")]),
      exit: Type.Union([Type.Integer(), Type.Null()]),
      ms: Type.Integer({ minimum: 0 }),
      tokens: Type.Union([Type.Object({ input: Type.Integer({ minimum: 0 }), output: Type.Integer({ minimum: 0 }) }), Type.Null()]),
      /** Seconds the run held the box awake. */
      boxSeconds: Type.Number({ minimum: 0 }),
      reason: Type.Optional(Text(1024)),
    }),
  ),
  attentionRequired: defineEvent("attention.required", Type.Object({ reason: Text(1024) }), { byClients: true }),
  /** The driver stopped the agent's turn (an editor's Stop, ACP's session/cancel, POST …/interrupt); its actor is who. How the turn ended follows. */
  turnInterrupted: defineEvent("turn.interrupted", Type.Object({})),
  // A log continued elsewhere (`hutch bring-back --session`): each event of a
  // session on the box's daemon, appended here with who wrote it and when, and
  // where it came from; then one marker naming what came back. Written by the
  // CLI that brings the work home, after checking each event against this registry.
  sessionEventImported: defineEvent(
    "session.event.imported",
    Type.Object({
      from: Type.Object({ remote: Text(256), session: Type.String({ minLength: 1, maxLength: 64 }), seq: Seq }),
      at: Type.String({ minLength: 1, maxLength: 64 }),
      actor: Actor,
      kind: Type.String({ minLength: 1, maxLength: 128 }),
      data: Type.Unknown(),
    }),
    { byClients: true },
  ),
  sessionWorkReturned: defineEvent(
    "session.work.returned",
    Type.Object({
      box: Text(128),
      remote: Text(256),
      /** The bring-back's case: nothing, fast-forward, merge or branch. */
      case: Text(32),
      sessions: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 1000 }),
      events: Type.Integer({ minimum: 0 }),
    }),
    { byClients: true },
  ),
  /** `hutch session move`: in the session left behind, where it went (its box there holds the work, its log goes on there). */
  sessionMoved: defineEvent(
    "session.moved",
    Type.Object({ to: Type.Object({ remote: Text(256), session: Type.String({ minLength: 1, maxLength: 64 }), box: Text(128) }) }),
    { byClients: true },
  ),
  /** In the session it became: where it came from (its events are imported just before this). */
  sessionArrived: defineEvent(
    "session.arrived",
    Type.Object({
      from: Type.Object({ remote: Text(256), session: Type.String({ minLength: 1, maxLength: 64 }), box: Text(128) }),
      events: Type.Integer({ minimum: 0 }),
    }),
    { byClients: true },
  ),
  // The broker: every egress decision, never the secret.
  egressAllowed: defineEvent("egress.allowed", EgressData),
  egressDenied: defineEvent("egress.denied", EgressData),
  egressInjected: defineEvent("egress.injected", EgressData),
  // Approvals (host/src/approval): what crosses the box's boundary waiting for a person. A request is logged
  // once, in one open session of its box, and its one decision (or expiry) follows it in the same log;
  // the decision's actor is who decided.
  approvalRequested: defineEvent(
    "approval.requested",
    Type.Object({
      id: ApprovalId,
      kind: ApprovalKind,
      box: Type.String(),
      session: Type.String(),
      /** What a person judges: e.g. "POST api.github.com/repos/o/r/issues (github), 120 bytes". */
      summary: Text(APPROVAL_SUMMARY_MAX),
      /** Of exactly what would be done (host/src/approval/README.md says what goes in for each kind). */
      digest: ApprovalDigest,
      /** What it is about, for its source to act on (egress: the host:port that allow_always adds to the box's policy). */
      target: Type.Optional(Text(300)),
      expiresAt: Type.String({ minLength: 1, maxLength: 64 }),
    }),
  ),
  approvalDecided: defineEvent(
    "approval.decided",
    Type.Object({
      id: ApprovalId,
      decision: ApprovalOutcome,
      digest: ApprovalDigest,
      reason: Type.Optional(Text(APPROVAL_REASON_MAX)),
    }),
  ),
  /** A decision that was not taken: e.g. sent through the box's own connection (an agent approving itself). */
  approvalRefused: defineEvent("approval.refused", Type.Object({ id: ApprovalId, reason: Text(APPROVAL_REASON_MAX) })),
  errorRaised: defineEvent("error.raised", Type.Object({ message: Text(), code: Type.Optional(Text(64)) }), { byClients: true }),
  // `hutch mcp`: each tool call an MCP client makes on a box, and its end. The actor (stamped by the daemon) is the MCP client.
  mcpToolCalled: defineEvent("mcp.tool.called", Type.Object({ id: Text(64), name: Text(64), input: Type.Unknown() }), { byClients: true }),
  // An agent in the box connected to the box's own MCP server (hutch-guest's; host/src/harness/mcp-link.ts) and has its tools; named as it names itself.
  mcpClientConnected: defineEvent("mcp.client.connected", Type.Object({ name: Text(128), version: Text(64) })),
  mcpToolCompleted: defineEvent(
    "mcp.tool.completed",
    Type.Object({
      id: Text(64),
      name: Text(64),
      status: Type.Union([Type.Literal("ok"), Type.Literal("error")]),
      output: Text(4096),
      ms: Type.Integer({ minimum: 0 }),
    }),
    { byClients: true },
  ),
  // Coding agents: what an agent CLI in a box does, mapped from its
  // structured stream by host/src/harness. Written by the daemon only.
  messageStarted: defineEvent("message.started", Type.Object({ id: Text(256), role: MessageRole })),
  messageDelta: defineEvent("message.delta", Type.Object({ id: Text(256), text: Text() })),
  messageCompleted: defineEvent(
    "message.completed",
    Type.Object({ id: Text(256), role: MessageRole, text: Text(), truncated: Type.Optional(Type.Boolean()) }),
  ),
  toolCalled: defineEvent("tool.called", Type.Object({ id: Text(256), name: Text(256), input: Type.Unknown() })),
  toolCompleted: defineEvent(
    "tool.completed",
    Type.Object({
      id: Text(256),
      output: Text(),
      status: Type.Union([Type.Literal("ok"), Type.Literal("error")]),
      truncated: Type.Optional(Type.Boolean()),
    }),
  ),
  /** Token counts as the agent reported them; null where it reported none (`available: false` when it reported nothing at all). */
  usageReported: defineEvent(
    "usage.reported",
    Type.Object({ available: Type.Boolean(), input: TokenCount, output: TokenCount, cached: TokenCount }),
  ),
  agentState: defineEvent(
    "agent.state",
    Type.Object({
      state: Type.Union([Type.Literal("busy"), Type.Literal("idle"), Type.Literal("needs-input"), Type.Literal("error")]),
      reason: Type.Optional(Text(1024)),
      exit: Type.Optional(
        Type.Object({ code: Type.Union([Type.Integer(), Type.Null()]), signal: Type.Union([Type.String(), Type.Null()]) }),
      ),
    }),
  ),
  /** A stream record the harness did not understand (or could not parse), kept verbatim up to 64 KiB. */
  agentRaw: defineEvent(
    "agent.raw",
    Type.Object({
      line: Text(),
      reason: Type.Union([Type.Literal("unknown"), Type.Literal("unparsed"), Type.Literal("invalid"), Type.Literal("stderr")]),
      truncated: Type.Optional(Type.Boolean()),
    }),
  ),
};

type Registry = typeof Events;

/** Every registered kind's name. */
export type EventKind = Registry[keyof Registry]["kind"];

/**
 * An event of a registered kind with the data its schema gives it: a union
 * discriminated by `kind`, so checking the kind types the data. What
 * producers write and what `isEvent` lets readers see.
 */
export type TypedEvent = { [N in keyof Registry]: { kind: Registry[N]["kind"]; data: Static<Registry[N]["data"]> } }[keyof Registry];

/** The data of one kind, by its name. */
export type EventData<K extends EventKind> = Extract<TypedEvent, { kind: K }>["data"];

/** An event of `def`'s kind, its data typed by the kind's schema: `emit(Events.inputSent, { text })`. */
export function emit<D extends EventDef>(def: D, data: Static<D["data"]>): { kind: D["kind"]; data: Static<D["data"]> } {
  return { kind: def.kind, data };
}

/**
 * The data of `e` when it is an event of `def`'s kind and its data fits the
 * schema; else null. Events come from the log over the daemon's API, so
 * readers check them rather than trust them.
 */
export function read<D extends EventDef>(e: { kind: string; data: unknown }, def: D): Static<D["data"]> | null {
  return e.kind === def.kind && check(def.data, e.data) ? e.data : null;
}

/** Whether `e` is of a registered kind and its data fits; afterwards `e.kind` types `e.data`. */
export function isEvent<E extends { kind: string; data: unknown }>(e: E, from: "client" | "daemon" = "daemon"): e is E & TypedEvent {
  return checkEvent(e.kind, e.data, from) === null;
}

/** One stored event. */
export const SessionEvent = Type.Object({
  session: Type.String(),
  seq: Seq,
  at: Type.String(),
  actor: Actor,
  kind: Type.String(),
  data: Type.Unknown(),
});
export type SessionEvent = Static<typeof SessionEvent>;

/** What a producer sends: no seq, no actor, no time (the daemon assigns them). */
export const EventInput = Type.Object(
  {
    kind: Type.String({ minLength: 1, maxLength: 128 }),
    data: Type.Unknown(),
    idempotencyKey: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);
export type EventInput = Static<typeof EventInput>;
