// The change feed: what a sidebar needs to stay current without polling.
// Boxes that appear, change state or go, and sessions whose row changed
// (created, closed, driver moved). Live only: a client lists after it starts
// listening, so nothing falls between the list and the feed. Each watcher
// hears only of what its user may see: a box's removal too, decided while its
// owner and shares are still there, so another user's names and ids never leak.
import type { Actor, FeedChange, Session } from "@hutch/shared";
import type { BoxService } from "../../box/service.ts";
import type { SessionService } from "../../session/service.ts";
import { actorUser } from "../../actors.ts";

/** Event kinds after which a session's row (state, driver) differs. */
const SESSION_ROW_KINDS = /^session\./;

export class ChangeService {
  /** How to end each open feed, with the token it was opened with (server mode). */
  private readonly closers = new Map<() => void, string | undefined>();

  constructor(
    private readonly boxes: BoxService,
    private readonly sessions: SessionService,
  ) {}

  /** Registers how to end one open feed; close() ends them all (a long response would hold the daemon's shutdown). */
  onClose(fn: () => void, token?: string): () => void {
    this.closers.set(fn, token);
    return () => this.closers.delete(fn);
  }

  /** Ends the feeds opened with a token (it was revoked or expired). */
  closeToken(token: string): void {
    for (const [fn, t] of [...this.closers]) if (t === token) fn();
  }

  close(): void {
    for (const fn of [...this.closers.keys()]) fn();
    this.closers.clear();
  }

  /** Calls fn with every change the actor may see; returns the unwatch. */
  watch(actor: Actor, fn: (c: FeedChange) => void): () => void {
    const maySee = (id: string) => actor.kind === "system" || (this.sessions.boxAccess?.(id, actorUser(actor)) ?? null) !== null;
    // Once a box is gone its owner and shares are too, so who may hear of its removal is decided just before.
    const leaving = new Set<string>();
    // A warm pool's boxes are the server's, never listed: nobody hears of them.
    const pooled = (id: string) => {
      const row = this.boxes.byId(id);
      return row !== null && this.boxes.warm?.pooled(row) === true;
    };
    const offRemoving = this.boxes.removing.add((id) => {
      if (maySee(id) && !pooled(id)) leaving.add(id);
    });
    const offBoxes = this.boxes.changes.add((id) => {
      const row = this.boxes.byId(id);
      if (row && pooled(id)) return;
      if (!row) {
        if (leaving.delete(id)) fn({ type: "box.removed", id });
        return;
      }
      if (maySee(id)) fn({ type: "box", box: this.boxes.get(id) });
    });
    const offSessions = this.sessions.bus.subscribeAll((id, kind) => {
      if (!SESSION_ROW_KINDS.test(kind)) return;
      // Publishing follows the transaction that also updated the row, so the row read here is current.
      const session = this.visible(id, actor);
      if (session) fn({ type: "session", session });
    });
    return () => {
      offRemoving();
      offBoxes();
      offSessions();
    };
  }

  /** The session, or null when this actor may not see it. */
  private visible(id: string, actor: Actor): Session | null {
    try {
      return this.sessions.get(id, actor);
    } catch {
      return null;
    }
  }
}
