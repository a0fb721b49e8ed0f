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
  firstLine,
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
/** How far into a log its first line is looked for (a shell's first command is in its first few hundred events, echo and all). */
const FIRST_SCAN = 500;

export class SessionSummaries {
  private readonly store: SummaryTable;
  /** Each session's first line, once it can no longer change. */
  private readonly firsts = new Map<string, string | null>();

  constructor(private readonly sessions: SessionLog) {
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
    const first = this.first(session.id);
    return { session, activity: activityOf(turn), turn, anchors, ...(first ? { first } : {}) };
  }

  /**
   * The session's first prompt or command (shared's firstLine over its first
   * inputs), read from the start of its log, not folded: it is a function of
   * the first events, and a fold must not depend on the order it sees them in.
   * Given, and kept, once final: its line ended, or the log is past where it is looked for.
   */
  private first(sessionId: string): string | undefined {
    const known = this.firsts.get(sessionId);
    if (known !== undefined) return known ?? undefined;
    const page = this.sessions.readText(sessionId, 1, FIRST_SCAN, "\n");
    const inputs = page.text
      .split("\n")
      .filter((l) => l.includes('"input.sent"'))
      .map((l) => JSON.parse(l) as { kind: string; data: { text?: unknown } })
      .filter((e) => e.kind === "input.sent" && typeof e.data?.text === "string")
      .map((e) => e.data.text as string);
    const line = firstLine(inputs);
    // A line still being typed is not a name yet.
    const final = line?.done || page.count >= FIRST_SCAN;
    const text = (final && line?.text.trim()) || null;
    if (final) this.firsts.set(sessionId, text);
    return text ?? undefined;
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
