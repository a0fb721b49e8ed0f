// A session's summary: its row, what its turn is doing and its anchored
// annotations, as the daemon keeps them current while events are appended
// (fold.ts folds them). A client reads a summary, then
// subscribes from lastSeq + 1 and folds what follows the same way.
import { Type, type Static } from "@sinclair/typebox";
import { Session } from "./api.ts";
import { Actor, Anchor, Events } from "./events.ts";

const AgentState = Events.agentState.data.properties.state;
/** What the agent says it is doing: exactly the states agent.state allows. */
export type AgentStateName = Static<typeof AgentState>;

/**
 * What a session is doing, as the sidebar shows it: the agent's own state,
 * `needs-input` once attention was asked (a failed turn stays `error`), and
 * `closed`. A shell, which has no agent, reads as idle.
 */
export const SessionActivity = Type.Union([...AgentState.anyOf, Type.Literal("closed")]);
export type SessionActivity = Static<typeof SessionActivity>;

const SeqOrNone = Type.Integer({ minimum: 0 });

/** Where a session's turn is: the seq of the latest event of each kind that moves it (0: none yet). */
export const TurnState = Type.Object({
  input: SeqOrNone,
  attention: SeqOrNone,
  started: SeqOrNone,
  exited: SeqOrNone,
  closed: SeqOrNone,
  /** The latest exec.started of a warm agent (one kept between prompts), absent when there was none. */
  warm: Type.Optional(SeqOrNone),
  /** The latest agent.state. */
  agent: Type.Optional(
    Type.Object({
      seq: Type.Integer({ minimum: 1 }),
      state: AgentState,
      reason: Type.Optional(Type.String()),
      exit: Type.Optional(
        Type.Object({ code: Type.Union([Type.Integer(), Type.Null()]), signal: Type.Union([Type.String(), Type.Null()]) }),
      ),
    }),
  ),
  /** How the latest exec.exited ended. */
  exit: Type.Optional(Type.Object({ code: Type.Union([Type.Integer(), Type.Null()]), signal: Type.Union([Type.String(), Type.Null()]) })),
});
export type TurnState = Static<typeof TurnState>;

/** An annotation anchored to a line of a file. */
export const AnchoredAnnotation = Type.Object({
  seq: Type.Integer({ minimum: 1 }),
  at: Type.String(),
  actor: Actor,
  text: Type.String(),
  anchor: Anchor,
});
export type AnchoredAnnotation = Static<typeof AnchoredAnnotation>;

/** At most this many anchored annotations per summary: the latest. */
export const SUMMARY_ANCHORS = 1000;

/** GET /v1/sessions/:id/summary, and each item of GET /v1/summaries. Everything in it is as of session.lastSeq. */
export const SessionSummary = Type.Object({
  session: Session,
  activity: SessionActivity,
  turn: TurnState,
  anchors: Type.Array(AnchoredAnnotation),
  /** Its first prompt or command (firstLine of its first inputs), as the sidebar names it. */
  first: Type.Optional(Type.String()),
});
export type SessionSummary = Static<typeof SessionSummary>;
