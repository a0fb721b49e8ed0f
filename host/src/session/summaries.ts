// Every session's summary, kept as its events are stored: the store runs
// fold() inside the append's transaction, so a session's turn and its list of
// anchored annotations commit with the event that changed them.
//
// Persisted rather than rebuilt on daemon start: a rebuild would read every
// log (a million events for 200 busy sessions) where reading a summary is a
// row and an index range. A session from before summaries were kept has no
// row; its summary is built once from its log, the first time it is needed.
import {
  activityOf,
  anchoredAnnotation,
  emptyTurn,
  foldTurn,
  SUMMARY_ANCHORS,
  TURN_KINDS,
  type AnchoredAnnotation,
  type Session,
  type SessionSummary,
  type TurnState,
} from "@hutch/shared";
import type { NewEvent, SessionLog, SummaryTable } from "../store/types.ts";

const TURN = new Set(TURN_KINDS);
const FOLDED_KINDS = [...TURN_KINDS, "annotation.added"];

export class SessionSummaries {
  private readonly store: SummaryTable;

  constructor(sessions: SessionLog) {
    this.store = sessions.summaries;
    sessions.onStored((id, seq, at, e) => this.fold(id, seq, at, e));
  }

  /** The session's turn as of its last stored event. */
  turn(sessionId: string): TurnState {
    return this.store.turn(sessionId) ?? this.build(sessionId);
  }

  /** The summary of a session (its row as the caller read it, in the same tick). */
  of(session: Session): SessionSummary {
    const turn = this.turn(session.id);
    const anchors = this.store
      .anchors(session.id, SUMMARY_ANCHORS)
      .map((r) => anchoredAnnotation({ ...r, kind: "annotation.added" }))
      .filter((a): a is AnchoredAnnotation => a !== null);
    return { session, activity: activityOf(turn), turn, anchors };
  }

  private fold(sessionId: string, seq: number, at: string, e: NewEvent): void {
    if (e.kind === "session.created") return this.store.setTurn(sessionId, emptyTurn());
    if (TURN.has(e.kind)) {
      const before = this.turn(sessionId);
      const after = foldTurn(before, { seq, kind: e.kind, data: e.data });
      if (after !== before) this.store.setTurn(sessionId, after);
    } else if (anchoredAnnotation({ seq, at, actor: e.actor, kind: e.kind, data: e.data })) {
      this.turn(sessionId); // a session without a row gets its older anchors first
      this.store.addAnchor(sessionId, seq);
    }
  }

  /** Folds a session's whole log once, for a session stored before summaries were kept. */
  private build(sessionId: string): TurnState {
    let turn = emptyTurn();
    for (const e of this.store.eventsOf(sessionId, FOLDED_KINDS)) {
      turn = foldTurn(turn, e);
      if (anchoredAnnotation(e)) this.store.addAnchor(sessionId, e.seq);
    }
    this.store.setTurn(sessionId, turn);
    return turn;
  }
}
