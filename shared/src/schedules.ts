// Schedules (host/src/schedule): a box, an agent and a prompt, run headless on
// a cron expression or once at a time. Bodies and answers of /v1/schedules.
import { Type, type Static } from "@sinclair/typebox";
import { AgentName } from "./api.ts";
import { idPattern } from "./ids.ts";

export const ScheduleId = Type.String({
  pattern: idPattern("sch"),
  title: "schedule",
  rule: "a schedule id: sch_ and 20 lowercase letters or digits",
});

export const CatchUp = Type.Union([Type.Literal("once"), Type.Literal("skip")]);
export type CatchUp = Static<typeof CatchUp>;

/** POST /v1/schedules. Exactly one of cron and at; times and durations are read by the daemon, with its clock. */
export const ScheduleCreateBody = Type.Object(
  {
    box: Type.String({ minLength: 1, maxLength: 128 }),
    /** Five fields (minute hour day-of-month month day-of-week) or a macro (@hourly, @daily, …), in the daemon's local time. */
    cron: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    /** Once: an ISO 8601 time (2026-12-04T09:00:00Z) or a duration from now (+10m, 90s, 1h30m). */
    at: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    agent: AgentName,
    prompt: Type.String({ minLength: 1, maxLength: 65536 }),
    /** How long one run may take before its turn is stopped (a duration; default 30m). */
    maxRun: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    /** Runs whose time came while the daemon was down: run once when it is back (default), or skip them. */
    catchUp: Type.Optional(CatchUp),
  },
  { additionalProperties: false },
);
export type ScheduleCreateBody = Static<typeof ScheduleCreateBody>;

export const ScheduleRunStatus = Type.Union([
  Type.Literal("running"),
  Type.Literal("ok"),
  Type.Literal("error"),
  Type.Literal("timeout"),
  Type.Literal("interrupted"),
]);
export type ScheduleRunStatus = Static<typeof ScheduleRunStatus>;

export const ScheduleTrigger = Type.Union([Type.Literal("cron"), Type.Literal("at"), Type.Literal("manual"), Type.Literal("catch-up")]);
export type ScheduleTrigger = Static<typeof ScheduleTrigger>;

export const Tokens = Type.Object({ input: Type.Integer({ minimum: 0 }), output: Type.Integer({ minimum: 0 }) });

/** One run of a schedule: its session and how it went. */
export const ScheduleRun = Type.Object({
  session: Type.Union([Type.String(), Type.Null()]),
  trigger: ScheduleTrigger,
  status: ScheduleRunStatus,
  startedAt: Type.String(),
  finishedAt: Type.Optional(Type.String()),
  /** The agent's exit code; null when it did not exit on its own (stopped, lost) or never started. */
  exit: Type.Union([Type.Integer(), Type.Null()]),
  ms: Type.Integer({ minimum: 0 }),
  /** Tokens the agent reported; null when it reported none. */
  tokens: Type.Union([Tokens, Type.Null()]),
  /** Seconds the run held the box awake (from its wake, or its start when the box was up, to the turn's end). */
  boxSeconds: Type.Number({ minimum: 0 }),
  /** Whether the run had to wake (or start) the box. */
  woke: Type.Boolean(),
  reason: Type.Optional(Type.String({ maxLength: 1024 })),
});
export type ScheduleRun = Static<typeof ScheduleRun>;

export const Schedule = Type.Object({
  id: ScheduleId,
  box: Type.String(),
  boxName: Type.String(),
  owner: Type.String(),
  agent: Type.String(),
  prompt: Type.String(),
  cron: Type.Union([Type.String(), Type.Null()]),
  /** A one-off's time (ISO 8601). */
  at: Type.Union([Type.String(), Type.Null()]),
  maxRunS: Type.Integer({ minimum: 1 }),
  catchUp: CatchUp,
  /** done: a one-off that ran (or was skipped). */
  state: Type.Union([Type.Literal("active"), Type.Literal("paused"), Type.Literal("done")]),
  /** When it runs next (a cron run's time with its spread added); null when paused or done. */
  nextAt: Type.Union([Type.String(), Type.Null()]),
  /** The spread added to each cron time for this box, in seconds. */
  spreadS: Type.Integer({ minimum: 0 }),
  lastRun: Type.Union([ScheduleRun, Type.Null()]),
  runs: Type.Integer({ minimum: 0 }),
  /** Runs missed while the daemon was down and not caught up (--catch-up skip), or missed while one was still running. */
  skipped: Type.Integer({ minimum: 0 }),
  createdAt: Type.String(),
});
export type Schedule = Static<typeof Schedule>;
