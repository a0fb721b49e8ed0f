// Daemon API bodies. The daemon validates requests against these (Elysia's t
// is TypeBox), the CLI and the extension read responses through the same types.
import { Kind, Type, TypeRegistry, type Static, type TLiteral, type TSchema } from "@sinclair/typebox";
import { GetErrorFunction, SetErrorFunction } from "@sinclair/typebox/errors";
import { BindingName, EgressDecision, HostPattern } from "./broker.ts";
import { Actor, Anchor, EventInput, SessionEvent } from "./events.ts";
import { idPattern } from "./ids.ts";
import { API_LIMITS } from "./limits.ts";
import { AGENT_NAMES, ENGINE_NAMES } from "./names.ts";

/**
 * A whole number from a query string or a path segment: its digits (or a
 * number), from `minimum` to `maximum`, decoded to a number. It is a kind of
 * its own rather than a Number that Elysia converts (t.Numeric), because
 * Elysia checks that one's range while decoding and, in a binary built with
 * --minify, loses the error (it matches the error by class name) and passes
 * the raw string on: `?limit=0` reached SQLite. This one is checked before
 * decoding, like any field, so the refusal names it.
 */
export interface TWholeNumber extends TSchema {
  [Kind]: "WholeNumber";
  static: number;
  minimum: number;
  maximum: number;
}
TypeRegistry.Set<TWholeNumber>("WholeNumber", (schema, value) => {
  const n = typeof value === "string" && /^[0-9]{1,16}$/.test(value) ? Number(value) : value;
  return typeof n === "number" && Number.isSafeInteger(n) && n >= schema.minimum && n <= schema.maximum;
});
export const WholeNumber = (minimum: number, maximum: number) =>
  Type.Transform({ [Kind]: "WholeNumber", type: "integer", minimum, maximum } as unknown as TWholeNumber)
    .Decode((v: unknown) => Number(v))
    .Encode((n) => n);

/** Any JSON of at most `maxJsonLength` characters once serialised: client-supplied free-form data. */
export interface TJsonData extends TSchema {
  [Kind]: "JsonData";
  static: unknown;
  maxJsonLength: number;
}
TypeRegistry.Set<TJsonData>("JsonData", (schema, value) => {
  try {
    return JSON.stringify(value).length <= schema.maxJsonLength;
  } catch {
    // undefined, a cycle, a BigInt: not JSON.
    return false;
  }
});
const otherErrors = GetErrorFunction();
SetErrorFunction((e) => {
  if (e.schema[Kind] === "JsonData") return `Expected at most ${(e.schema as TJsonData).maxJsonLength} characters of JSON`;
  if (e.schema[Kind] === "WholeNumber")
    return `Expected a whole number from ${(e.schema as TWholeNumber).minimum} to ${(e.schema as TWholeNumber).maximum}`;
  return otherErrors(e);
});
export const JsonData = (maxJsonLength: number): TJsonData =>
  ({ [Kind]: "JsonData", maxJsonLength, description: `any JSON of at most ${maxJsonLength} characters` }) as TJsonData;

/** A box name, unanchored (to compose into other patterns): it is also the box's hostname. */
export const BOX_NAME = "[a-z0-9][a-z0-9-]{0,62}";
export const BoxName = Type.String({
  pattern: `^${BOX_NAME}$`,
  title: "box name",
  description: "lowercase letters, digits and dashes",
  rule: "use lowercase letters, digits and '-', starting with a letter or digit (at most 63)",
});
/** A union of literals from a list of names, typed member by member (a plain map would type it as one wide literal). */
type Literals<T extends readonly string[]> = { -readonly [K in keyof T]: TLiteral<T[K]> };
const literals = <T extends readonly string[]>(names: T): Literals<T> => names.map((n) => Type.Literal(n)) as unknown as Literals<T>;

export const EngineName = Type.Union(literals(ENGINE_NAMES));
export type EngineName = Static<typeof EngineName>;
export { ENGINE_NAMES };

export const BoxState = Type.Union([
  Type.Literal("creating"),
  Type.Literal("stopped"),
  Type.Literal("starting"),
  Type.Literal("running"),
  Type.Literal("paused"),
  /** Saving its programs' state to disk (a VM's memory) before its processes end. */
  Type.Literal("sleeping"),
  /** No process on the host; its programs' state (or, where the engine cannot keep it, its disk) waits for a wake. */
  Type.Literal("asleep"),
  /** Restoring from sleep. */
  Type.Literal("waking"),
  Type.Literal("stopping"),
  Type.Literal("failed"),
  Type.Literal("deleted"),
]);
export type BoxState = Static<typeof BoxState>;
export const DesiredState = Type.Union([
  Type.Literal("stopped"),
  Type.Literal("running"),
  Type.Literal("paused"),
  Type.Literal("asleep"),
  Type.Literal("deleted"),
]);
export type DesiredState = Static<typeof DesiredState>;

/**
 * What a box's sleep keeps: "memory", every program running on wake (a VM's
 * RAM and devices, CRIU); "disk", the programs end and the agent's
 * conversation resumes from its harness's session on wake.
 */
export const SleepKeeps = Type.Union([Type.Literal("memory"), Type.Literal("disk")]);
export type SleepKeeps = Static<typeof SleepKeeps>;

/** What a fleet does when a box's server dies: "always", made again elsewhere from its latest checkpoint; "never" (the default). */
export const RestartPolicy = Type.Union([Type.Literal("always"), Type.Literal("never")]);
export type RestartPolicy = Static<typeof RestartPolicy>;

export const Box = Type.Object({
  id: Type.String(),
  name: Type.String(),
  engine: EngineName,
  isolation: Type.Union([Type.Literal("namespace"), Type.Literal("vm")]),
  state: BoxState,
  desired: DesiredState,
  reason: Type.Optional(Type.String()),
  pid: Type.Optional(Type.Integer()),
  guest: Type.Optional(Type.Object({ version: Type.String(), capabilities: Type.Array(Type.String()) })),
  /** What the engine says about this box (a VM's accelerator and why, its sizes). */
  engineInfo: Type.Optional(Type.Record(Type.String(), Type.String())),
  /** An asleep box: what its sleep keeps (a VM's memory, or only its disk) and the bytes its sleeping state takes on the host. */
  sleep: Type.Optional(Type.Object({ keeps: SleepKeeps, bytes: Type.Integer({ minimum: 0 }) })),
  /** When it sleeps by itself, in seconds (null: never); absent when neither is set. */
  autoSleep: Type.Optional(
    Type.Object({ sleepAfterS: Type.Union([Type.Integer(), Type.Null()]), maxAwakeS: Type.Union([Type.Integer(), Type.Null()]) }),
  ),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  /** In a fleet (`hutch serve --cluster`): the node that runs it. */
  server: Type.Optional(Type.String({ maxLength: 64 })),
  /** `--restart always`: in a fleet, made again on another server from its latest checkpoint when its server dies. */
  restart: Type.Optional(RestartPolicy),
  /** `--checkpoint-every`: a snapshot of it every so many seconds, and the latest one taken. */
  checkpoint: Type.Optional(
    Type.Object({
      everyS: Type.Integer({ minimum: 1 }),
      last: Type.Optional(Type.Object({ snapshot: Type.String({ maxLength: 64 }), at: Type.String({ maxLength: 64 }) })),
    }),
  ),
});
export type Box = Static<typeof Box>;

/**
 * A box's resource limits, on every engine: CPUs, memory, processes (the
 * process engine; a VM's own kernel bounds its processes) and disk (the
 * process engine's per-box disk, or a VM's overlay).
 */
const BoxLimitFields = {
  cpus: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
  memoryMiB: Type.Optional(Type.Integer({ minimum: 64, maximum: 1048576 })),
  pids: Type.Optional(Type.Integer({ minimum: 16, maximum: 4194304 })),
  disk: Type.Optional(
    Type.String({ pattern: "^[1-9][0-9]{0,6}[MGT]$", description: "disk size, e.g. 20G", rule: "a size in M, G or T, e.g. 20G" }),
  ),
};

/**
 * Sleeping by itself (host/src/box/idle.ts): after this long idle, and after
 * this long awake at most (never with a client attached). A duration (5s, 30m,
 * 2h) or off; read by the daemon.
 */
const AutoSleepFields = {
  sleepAfter: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
  maxAwake: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
};

/** `hutch box set`: new limits for a stopped box, applied at its next start; the sleep settings change at any time. */
export const BoxSetBody = Type.Object({ ...BoxLimitFields, ...AutoSleepFields }, { additionalProperties: false, minProperties: 1 });
export type BoxSetBody = Static<typeof BoxSetBody>;

/** A snapshot's id (snap_…) or a unique prefix of at least 8 characters of its object name. */
export const SnapshotRef = Type.String({
  minLength: 8,
  maxLength: 64,
  pattern: "^[0-9a-z_]+$",
  title: "snapshot",
  rule: "a snapshot id (snap_…) or its unique prefix: lowercase letters, digits and '_'",
});

export const BoxCreateBody = Type.Object(
  {
    name: BoxName,
    /** Fork: the new box starts with this snapshot's files (and its own identity: id, broker stubs, agent config). */
    from: Type.Optional(SnapshotRef),
    engine: Type.Optional(EngineName),
    start: Type.Optional(Type.Boolean()),
    ...BoxLimitFields,
    ...AutoSleepFields,
    /** In a fleet: run it on this node, or on one whose labels (`hutch serve --label`) include all of these. */
    node: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9_-]{1,64}$", rule: "a node name: 1 to 64 letters, digits, _ or -" })),
    on: Type.Optional(
      Type.Record(Type.String({ pattern: "^[a-z0-9][a-z0-9._-]{0,62}$" }), Type.String({ maxLength: 128 }), { maxProperties: 16 }),
    ),
    /** In a fleet: made again on another server from its latest checkpoint when its server dies ("always"). */
    restart: Type.Optional(RestartPolicy),
    /** A snapshot of the box every so long (a duration: 30s, 10m, 1h), kept as its checkpoint. */
    checkpointEvery: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    /** VM settings (qemu engine). */
    image: Type.Optional(
      Type.String({
        pattern: "^[a-z0-9][a-z0-9._-]{0,63}$",
        title: "image",
        rule: "use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
      }),
    ),
    /** Extra kernel command line for the VM (debugging a boot). */
    kernelArgs: Type.Optional(Type.String({ maxLength: 1024, pattern: "^[ -~]*$", rule: "printable ASCII only, on one line" })),
    /** Egress: hosts CONNECT may reach, and bindings whose credential the broker injects. */
    allow: Type.Optional(Type.Array(HostPattern, { maxItems: 256 })),
    secrets: Type.Optional(Type.Array(BindingName, { maxItems: 32 })),
  },
  { additionalProperties: false },
);
export type BoxCreateBody = Static<typeof BoxCreateBody>;

export const Op = Type.Object({
  id: Type.String(),
  boxId: Type.String(),
  kind: Type.String(),
  status: Type.Union([Type.Literal("pending"), Type.Literal("done"), Type.Literal("failed")]),
  error: Type.Optional(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});
export type Op = Static<typeof Op>;

/** pid and home are the local socket's: a remote caller (server mode) gets neither. */
export const Health = Type.Object({
  ok: Type.Boolean(),
  version: Type.String(),
  pid: Type.Optional(Type.Integer()),
  home: Type.Optional(Type.String()),
});
export type Health = Static<typeof Health>;

export const SessionState = Type.Union([Type.Literal("open"), Type.Literal("closed")]);
export const ClientKind = Type.Union([Type.Literal("cli"), Type.Literal("ide"), Type.Literal("agent"), Type.Literal("orchestrator")]);
export type ClientKind = Static<typeof ClientKind>;

export const Session = Type.Object({
  id: Type.String(),
  box: Type.String(),
  boxName: Type.String(),
  agent: Type.String(),
  label: Type.Optional(Type.String()),
  state: SessionState,
  owner: Type.String(),
  pty: Type.Optional(Type.String()),
  /** The agent runs headless, with no terminal: one process per prompt, or, for a session made with no prompt, one kept between prompts where its harness can. */
  headless: Type.Optional(Type.Boolean()),
  driver: Type.Optional(
    Type.Object({
      actor: Actor,
      leaseMs: Type.Optional(Type.Integer()),
      expiresAt: Type.Optional(Type.String()),
    }),
  ),
  lastSeq: Type.Integer({ minimum: 0 }),
  createdAt: Type.String(),
  closedAt: Type.Optional(Type.String()),
});
export type Session = Static<typeof Session>;

/**
 * GET /v1/changes is NDJSON: `hello` first, then a line per change, and a
 * `ping` every 5 s. Live only: a client lists after `hello`.
 */
export const BoxChange = Type.Object({ type: Type.Literal("box"), box: Box });
export const BoxRemovedChange = Type.Object({ type: Type.Literal("box.removed"), id: Type.String() });
/** A session's row changed (created, closed, driver moved). */
export const SessionChange = Type.Object({ type: Type.Literal("session"), session: Session });
export const FeedChange = Type.Union([BoxChange, BoxRemovedChange, SessionChange]);
export type FeedChange = Static<typeof FeedChange>;
export const FeedLine = Type.Union([Type.Object({ type: Type.Literal("hello") }), Type.Object({ type: Type.Literal("ping") }), FeedChange]);
export type FeedLine = Static<typeof FeedLine>;

export const AgentName = Type.Union(literals(AGENT_NAMES));
export type AgentName = Static<typeof AgentName>;
export { AGENT_NAMES };

export const SessionCreateBody = Type.Object(
  {
    box: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    agent: Type.Optional(AgentName),
    label: Type.Optional(Type.String({ maxLength: 256 })),
    /** Run the agent headless with this prompt (its structured stream becomes events) instead of in a terminal. */
    prompt: Type.Optional(Type.String({ minLength: 1, maxLength: 65536 })),
    /** Headless with no turn yet: the first prompt comes with the first input (an editor's session/new; implied by prompt). */
    headless: Type.Optional(Type.Boolean()),
    /**
     * "ask": a headless agent asks a person (hutch approvals) before each tool
     * call its own permission check holds, instead of running with its prompts
     * off (the default: the box is the sandbox).
     */
    permissions: Type.Optional(Type.Union([Type.Literal("ask"), Type.Literal("bypass")])),
    model: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 256,
        pattern: "^[A-Za-z0-9._:/@-]+$",
        rule: "a model name: letters, digits and . _ : / @ -",
      }),
    ),
    argv: Type.Optional(Type.Array(Type.String(), { minItems: 1, maxItems: 256 })),
    cols: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    rows: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  },
  { additionalProperties: false },
);
export type SessionCreateBody = Static<typeof SessionCreateBody>;

/** GET /v1/sessions/:id/events */
export const EventsPageQuery = Type.Object({
  from: Type.Optional(WholeNumber(1, API_LIMITS.whole)),
  limit: Type.Optional(WholeNumber(1, API_LIMITS.eventsPage)),
});

/**
 * A page of the log: `next` is the seq to ask for next, `last` the log's last
 * seq when the page was read (at least the page's end; in a fleet, a page that
 * ends before the server's copy of the log does may name that copy's end).
 */
export const EventsPage = Type.Object({
  events: Type.Array(SessionEvent),
  next: Type.Integer({ minimum: 1 }),
  last: Type.Integer({ minimum: 0 }),
});
export type EventsPage = Static<typeof EventsPage>;

/**
 * GET /v1/sessions/:id/subscribe?from=SEQ upgrades to a WebSocket whose text
 * messages hold one or more lines: each a SessionEvent, in seq order, and
 * once, when the replay has reached the live end, this line.
 */
export const CaughtUpLine = Type.Object({ type: Type.Literal("caught-up"), seq: Type.Integer({ minimum: 0 }) });
export type CaughtUpLine = Static<typeof CaughtUpLine>;
/** A subscriber too slow for its buffer is closed with this code and a SlowCloseReason (JSON) as the reason. */
export const SUBSCRIBE_CLOSE_SLOW = 4000;
/** Every event before `resumeFrom` was sent before the close: subscribing again from it loses and repeats nothing. */
export const SlowCloseReason = Type.Object({ resumeFrom: Type.Integer({ minimum: 1 }) });
export type SlowCloseReason = Static<typeof SlowCloseReason>;

/** GET /v1/sessions/:id/output/:chunk */
export const OutputChunkParams = Type.Object({
  id: Type.String({ pattern: idPattern("ses"), title: "session", rule: "a session id: ses_ and 20 lowercase letters or digits" }),
  chunk: WholeNumber(0, API_LIMITS.whole),
});

/** POST /v1/sessions/:id/events: client kinds, their data checked against the kind's schema by the session service (the idempotency key is the header). */
export const EventAppendBody = Type.Object(
  {
    events: Type.Array(
      Type.Object({ kind: EventInput.properties.kind, data: JsonData(API_LIMITS.eventData) }, { additionalProperties: false }),
      {
        minItems: 1,
        maxItems: 10_000,
      },
    ),
  },
  { additionalProperties: false },
);

/** POST /v1/sessions/:id/driver/{acquire,steal} */
export const DriverBody = Type.Object(
  { leaseMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 86_400_000 })) },
  { additionalProperties: false },
);
export type DriverBody = Static<typeof DriverBody>;

/** POST /v1/sessions/:id/input: typed into the session's terminal (or the next headless prompt), driver only. */
export const SessionInputBody = Type.Object({ text: Type.String({ minLength: 1, maxLength: 65536 }) }, { additionalProperties: false });
export type SessionInputBody = Static<typeof SessionInputBody>;

/** POST /v1/sessions/:id/interrupt (driver only): whether a headless turn was running and has now ended. */
export const SessionInterruptResult = Type.Object({ interrupted: Type.Boolean() });
export type SessionInterruptResult = Static<typeof SessionInterruptResult>;

/** POST /v1/sessions/:id/annotations */
export const AnnotateBody = Type.Object(
  { text: Type.String({ minLength: 1, maxLength: 65536 }), anchor: Type.Optional(Anchor) },
  { additionalProperties: false },
);
export type AnnotateBody = Static<typeof AnnotateBody>;

/** POST /v1/sessions/:id/fork: a new box and session from the session's checkpoint at or before `at`. */
export const SessionForkBody = Type.Object(
  {
    at: WholeNumber(1, API_LIMITS.whole),
    /** The new box's name (default: the old one's with -fork-<n>). */
    name: Type.Optional(BoxName),
    label: Type.Optional(Type.String({ maxLength: 256 })),
  },
  { additionalProperties: false },
);
export type SessionForkBody = Static<typeof SessionForkBody>;
export const SessionForkResult = Type.Object({
  /** The checkpoint event forked from, and its snapshot. */
  checkpoint: Type.Integer({ minimum: 1 }),
  snapshot: Type.String(),
  box: Box,
  session: Session,
});
export type SessionForkResult = Static<typeof SessionForkResult>;

/** POST /v1/sessions/:id/close */
export const SessionCloseBody = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 1024 })) }, { additionalProperties: false });
export type SessionCloseBody = Static<typeof SessionCloseBody>;

/** GET /v1/boxes/:ref/egress */
export const EgressQuery = Type.Object({
  decision: Type.Optional(EgressDecision),
  limit: Type.Optional(WholeNumber(1, API_LIMITS.egressPage)),
});

/**
 * POST /v1/dispatches: fork k workers from one snapshot, run the task
 * headless in each, grade each with a check it cannot edit, keep the winner
 * (host/src/dispatch/README.md).
 */
export const DispatchCreateBody = Type.Object(
  {
    /** The snapshot the workers fork from, or the box to snapshot first (`--here` offloads into one). */
    from: Type.Optional(SnapshotRef),
    box: Type.Optional(BoxName),
    /** The dispatch deletes this box once it has its snapshot (the one `--here` offloaded into). */
    ownBox: Type.Optional(Type.Boolean()),
    k: Type.Integer({ minimum: 1, maximum: 16 }),
    /** One agent per worker, cycled when shorter than k. */
    agents: Type.Array(AgentName, { minItems: 1, maxItems: 16 }),
    task: Type.String({ minLength: 1, maxLength: 65536 }),
    check: Type.String({ minLength: 1, maxLength: 4096 }),
    /** Globs, relative to workdir, restored from the base before grading (added to the defaults). */
    protect: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 1024 }), { maxItems: 64 })),
    pick: Type.Optional(Type.Union([Type.Literal("first"), Type.Literal("best")])),
    concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 16 })),
    /** Seconds a worker's turn may take before it is stopped and graded as timed out. */
    timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })),
    /** Where in the box the check runs and protect globs start (default /workspace). */
    workdir: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, pattern: "^/", rule: "an absolute path (starting with /)" })),
  },
  { additionalProperties: false },
);
export type DispatchCreateBody = Static<typeof DispatchCreateBody>;

export const DispatchWorkerStatus = Type.Union([
  Type.Literal("pending"),
  Type.Literal("running"),
  Type.Literal("grading"),
  Type.Literal("passed"),
  Type.Literal("failed"),
  Type.Literal("timeout"),
  Type.Literal("error"),
  Type.Literal("cancelled"),
]);
export const DispatchUsage = Type.Object({ input: Type.Integer({ minimum: 0 }), output: Type.Integer({ minimum: 0 }) });
export const DispatchWorker = Type.Object({
  n: Type.Integer({ minimum: 1 }),
  agent: Type.String(),
  box: Type.String(),
  /** The box is gone (a loser's, after the dispatch), its log, diff and verdict kept. */
  boxDeleted: Type.Boolean(),
  session: Type.Union([Type.String(), Type.Null()]),
  status: DispatchWorkerStatus,
  verdict: Type.Union([
    Type.Object({
      verdict: Type.String(),
      exit: Type.Union([Type.Integer(), Type.Null()]),
      score: Type.Union([Type.Number(), Type.Null()]),
      /** The check's last output lines, or why it did not run. */
      tail: Type.String(),
      ms: Type.Integer({ minimum: 0 }),
    }),
    Type.Null(),
  ]),
  score: Type.Union([Type.Number(), Type.Null()]),
  diffstat: Type.Union([Type.Object({ files: Type.Integer(), added: Type.Integer(), removed: Type.Integer() }), Type.Null()]),
  /** The worker's result, kept in the snapshot store, and its diff against the base as a file under $HUTCH_HOME. */
  snapshot: Type.Union([Type.String(), Type.Null()]),
  diff: Type.Union([Type.String(), Type.Null()]),
  usage: DispatchUsage,
  /** When its verdict was recorded (what --pick first orders by). */
  finishedAt: Type.Optional(Type.String()),
});
export type DispatchWorker = Static<typeof DispatchWorker>;
export const Dispatch = Type.Object({
  id: Type.String(),
  state: Type.Union([
    Type.Literal("running"),
    Type.Literal("done"),
    Type.Literal("cancelled"),
    Type.Literal("interrupted"),
    Type.Literal("failed"),
  ]),
  /** The orchestration session: `hutch session watch` it. */
  session: Type.String(),
  snapshot: Type.Union([Type.String(), Type.Null()]),
  workdir: Type.String(),
  check: Type.String(),
  pick: Type.Union([Type.Literal("first"), Type.Literal("best")]),
  /** The winning worker's number, and its box (kept). */
  winner: Type.Union([Type.Integer(), Type.Null()]),
  winnerBox: Type.Union([Type.String(), Type.Null()]),
  workers: Type.Array(DispatchWorker),
  usage: DispatchUsage,
  /** What happened to unfinished work after a daemon restart or a cancel, in words. */
  reason: Type.Optional(Type.String()),
  /** Every box this dispatch made is gone or kept on purpose (the winner's). */
  tornDown: Type.Boolean(),
  createdAt: Type.String(),
  finishedAt: Type.Optional(Type.String()),
});
export type Dispatch = Static<typeof Dispatch>;
