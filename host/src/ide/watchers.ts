// Every session the sidebar shows: its row and turn from the daemon's summary
// (all of them when the feed opens, one again on each change-feed session
// line), kept current while it is open by a tail of its log from where the
// summary ends, folded as the daemon folds it. Anchored annotations, from
// the summary and the tail, become diagnostics. A closed session is read
// from its summary alone: nothing is appended to it any more.
import {
  activityOf,
  anchoredAnnotation,
  Events,
  foldTurn,
  HutchError,
  read,
  type AnchoredAnnotation,
  type Session,
  type SessionSummary,
  type SessionView,
  type TurnState,
} from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { annotationDiagnostic } from "./anchors.ts";
import type { DiagnosticsStore } from "./diagnostics.ts";
import type { SessionTails } from "./tails.ts";

interface Watched {
  session: Session;
  turn: TurnState;
  /** The last seq folded into turn. */
  at: number;
  /** Its first prompt or command, from its summary. */
  first?: string;
  /** Stops the tail, while the session is open. */
  stop?: () => void;
}

export class SessionWatchers {
  private readonly watched = new Map<string, Watched>();

  constructor(
    private readonly daemon: DaemonClient,
    private readonly tails: SessionTails,
    private readonly root: () => string | null,
    private readonly diagnostics: DiagnosticsStore,
    private readonly changed: (s: SessionView) => void,
  ) {}

  /** Reads every session's summary, and takes it in once `before` resolved; sessions no longer listed are forgotten. */
  async loadAll(before: Promise<unknown> = Promise.resolve()): Promise<void> {
    const [list] = await Promise.all([this.daemon.request<SessionSummary[]>("GET", "/v1/summaries"), before]);
    const listed = new Set(list.map((s) => s.session.id));
    for (const id of [...this.watched.keys()]) if (!listed.has(id)) this.forget(id);
    for (const s of list) this.load(s);
  }

  /** Reads one session's summary again (its row changed); resolves with what the sidebar shows now, or null when it is gone. */
  async refresh(id: string): Promise<SessionView | null> {
    try {
      this.load(await this.daemon.request<SessionSummary>("GET", `/v1/sessions/${encodeURIComponent(id)}/summary`));
    } catch (err) {
      if (!(err instanceof HutchError) || (err.code !== "not_found" && err.code !== "denied")) throw err;
      this.forget(id);
      return null;
    }
    const w = this.watched.get(id);
    return w ? this.view(w) : null;
  }

  views(): SessionView[] {
    return [...this.watched.values()].map((w) => this.view(w));
  }

  close(): void {
    for (const w of this.watched.values()) w.stop?.();
    this.watched.clear();
  }

  private view(w: Watched): SessionView {
    const activity = w.session.state === "closed" ? "closed" : activityOf(w.turn);
    return { ...w.session, lastSeq: Math.max(w.session.lastSeq, w.at), activity, ...(w.first ? { first: w.first } : {}) };
  }

  private load(s: SessionSummary): void {
    const id = s.session.id;
    let w = this.watched.get(id);
    if (!w) {
      w = { session: s.session, turn: s.turn, at: s.session.lastSeq, ...(s.first ? { first: s.first } : {}) };
      this.watched.set(id, w);
    } else if (s.session.lastSeq >= w.at) {
      // Summaries can arrive out of order: only a newer one replaces what the tail folded.
      w.session = s.session;
      w.turn = s.turn;
      if (s.first) w.first = s.first;
      w.at = s.session.lastSeq;
    }
    for (const a of s.anchors) this.publish(w, a);
    if (w.session.state === "closed") {
      w.stop?.();
      delete w.stop;
    } else if (!w.stop) {
      w.stop = this.tail(w);
    }
  }

  private tail(w: Watched): () => void {
    const id = w.session.id;
    return this.tails.read(id, w.at + 1, {
      event: (e) => {
        if (e.seq <= w.at) return;
        const before = activityOf(w.turn);
        w.turn = foldTurn(w.turn, e);
        w.at = e.seq;
        const a = anchoredAnnotation(e);
        if (a) this.publish(w, a);
        if (activityOf(w.turn) !== before) this.changed(this.view(w));
        // The sidebar names a session by its first line: until it has one, an input may give it one.
        const typed = read(e, Events.inputSent)?.text;
        if (!w.first && typed && (typed.length > 1 || /[\r\n]/.test(typed)))
          void this.refresh(id).then(
            (v) => v && this.changed(v),
            () => undefined,
          );
      },
      // A session that disappears (or that we may no longer see) stops being watched.
      ended: () => this.forget(id),
    });
  }

  private publish(w: Watched, a: AnchoredAnnotation): void {
    const d = annotationDiagnostic(this.root(), w.session.id, a, w.session.label ?? w.session.id);
    if (d) this.diagnostics.add(d.uri, d.diagnostic);
  }

  private forget(id: string): void {
    this.watched.get(id)?.stop?.();
    this.watched.delete(id);
  }
}
