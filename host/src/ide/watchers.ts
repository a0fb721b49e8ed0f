// One watcher per session, for the whole bridge: it reads the session's log
// (replay, then live) to keep its activity current and to turn anchored
// annotations into diagnostics. Subscriptions resume by themselves across a
// daemon restart, so nothing is read twice or missed.
import type { Session, SessionActivity, SessionView } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { subscribe, type Subscription } from "../client/subscribe.ts";
import { nextActivity } from "./activity.ts";
import { annotationDiagnostic } from "./anchors.ts";
import type { DiagnosticsStore } from "./diagnostics.ts";

interface Watched {
  session: Session;
  activity: SessionActivity;
  sub: Subscription;
}

export class SessionWatchers {
  private readonly watched = new Map<string, Watched>();

  constructor(
    private readonly daemon: DaemonClient,
    private readonly root: () => string | null,
    private readonly diagnostics: DiagnosticsStore,
    private readonly changed: (s: SessionView) => void,
  ) {}

  view(id: string, fallback: Session): SessionView {
    const w = this.watched.get(id);
    const activity = fallback.state === "closed" ? "closed" : (w?.activity ?? "idle");
    return { ...fallback, activity };
  }

  /** Starts watching a session (no-op when already watched) and records its latest row. */
  track(session: Session): SessionView {
    const known = this.watched.get(session.id);
    if (known) {
      known.session = session;
      if (session.state === "closed") known.activity = "closed";
      return this.view(session.id, session);
    }
    // The handler runs only after subscribe's first request returns, by when w is set.
    let w!: Watched;
    const sub = subscribe(
      this.daemon,
      session.id,
      1,
      {
        event: (e) => {
          const before = w.activity;
          w.activity = nextActivity(before, e);
          const d = annotationDiagnostic(this.root(), e, w.session.label ?? w.session.id);
          if (d) this.diagnostics.add(d.uri, d.diagnostic);
          if (w.activity !== before) this.changed(this.view(session.id, w.session));
        },
      },
      { reconnectForMs: Number.POSITIVE_INFINITY },
    );
    w = { session, activity: session.state === "closed" ? "closed" : "idle", sub };
    this.watched.set(session.id, w);
    // A session that disappears (or that we may no longer see) stops being watched.
    w.sub.done.catch(() => this.watched.delete(session.id));
    return this.view(session.id, session);
  }

  close(): void {
    for (const w of this.watched.values()) w.sub.close();
    this.watched.clear();
  }
}
