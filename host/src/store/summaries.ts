// What a session's summary is kept in: one row per session with its folded
// turn, and the seqs of its anchored annotations (the annotations themselves
// stay in events). Written inside the transaction that stores the event, so
// a summary is never ahead of or behind its log.
import type { Database, Statement } from "bun:sqlite";
import type { Actor, TurnState } from "@hutch/shared";
import type { AnchorRow, SummaryTable } from "./types.ts";

export class SummaryStore implements SummaryTable {
  private readonly getTurn: Statement;
  private readonly putTurn: Statement;
  private readonly putAnchor: Statement;
  private readonly latestAnchors: Statement;

  constructor(private readonly db: Database) {
    this.getTurn = db.prepare("SELECT turn FROM session_turns WHERE session_id = ?");
    this.putTurn = db.prepare(
      "INSERT INTO session_turns (session_id, turn) VALUES (?, ?) ON CONFLICT (session_id) DO UPDATE SET turn = excluded.turn",
    );
    this.putAnchor = db.prepare("INSERT OR IGNORE INTO session_anchors (session_id, seq) VALUES (?, ?)");
    this.latestAnchors = db.prepare(
      "SELECT e.seq, e.at, e.actor, e.data FROM session_anchors a JOIN events e ON e.session_id = a.session_id AND e.seq = a.seq WHERE a.session_id = ? ORDER BY a.seq DESC LIMIT ?",
    );
  }

  /** The session's folded turn, or null when it has no row (a session from before summaries were kept). */
  turn(sessionId: string): TurnState | null {
    const row = this.getTurn.get(sessionId) as { turn: string } | null;
    return row ? (JSON.parse(row.turn) as TurnState) : null;
  }

  setTurn(sessionId: string, turn: TurnState): void {
    this.putTurn.run(sessionId, JSON.stringify(turn));
  }

  addAnchor(sessionId: string, seq: number): void {
    this.putAnchor.run(sessionId, seq);
  }

  /** The latest `limit` anchored annotations' events, oldest first. */
  anchors(sessionId: string, limit: number): AnchorRow[] {
    const rows = this.latestAnchors.all(sessionId, limit) as { seq: number; at: string; actor: string; data: string }[];
    return rows.reverse().map((r) => ({ seq: r.seq, at: r.at, actor: JSON.parse(r.actor) as Actor, data: JSON.parse(r.data) as unknown }));
  }

  /** Every event of these kinds, in order (to build a missing summary once). */
  eventsOf(sessionId: string, kinds: readonly string[]): { seq: number; at: string; actor: Actor; kind: string; data: unknown }[] {
    const sql = `SELECT seq, at, actor, kind, data FROM events WHERE session_id = ? AND kind IN (${kinds.map(() => "?").join(", ")}) ORDER BY seq`;
    const rows = this.db.query(sql).all(sessionId, ...kinds) as { seq: number; at: string; actor: string; kind: string; data: string }[];
    return rows.map((r) => ({
      seq: r.seq,
      at: r.at,
      actor: JSON.parse(r.actor) as Actor,
      kind: r.kind,
      data: JSON.parse(r.data) as unknown,
    }));
  }
}
