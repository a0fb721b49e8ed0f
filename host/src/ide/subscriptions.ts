// The extension's subscriptions (one per open log view): replay from a seq,
// then live, batched into hutch/events notifications. Awaiting each send
// pushes back on the daemon socket, so a slow editor slows the stream
// instead of growing the bridge.
import { HutchError, type EventsNotification, type SessionEvent, type SubscriptionEnded } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { subscribe, type Subscription } from "../client/subscribe.ts";

const BATCH = 1000;

export interface SubscriptionSink {
  events(n: EventsNotification): Promise<void>;
  ended(n: SubscriptionEnded): void;
}

export class ClientSubscriptions {
  private readonly subs = new Map<string, Subscription>();
  private counter = 0;

  constructor(
    private readonly daemon: DaemonClient,
    private readonly sink: SubscriptionSink,
  ) {}

  open(session: string, from: number): string {
    const id = `sub_${++this.counter}`;
    let batch: SessionEvent[] = [];
    let scheduled = false;
    let sending: Promise<void> = Promise.resolve();
    const flush = (caughtUp?: number) => {
      const events = batch;
      batch = [];
      if (events.length === 0 && caughtUp === undefined) return sending;
      sending = sending.then(() => this.sink.events({ subscription: id, session, events, ...(caughtUp !== undefined ? { caughtUp } : {}) }));
      return sending;
    };
    const sub = subscribe(
      this.daemon,
      session,
      from,
      {
        event: async (e) => {
          batch.push(e);
          if (batch.length >= BATCH) return flush();
          // Lines of one socket message are delivered in one go; send them together.
          if (!scheduled) {
            scheduled = true;
            setImmediate(() => {
              scheduled = false;
              void flush();
            });
          }
        },
        caughtUp: (seq) => void flush(seq),
      },
      { reconnectForMs: Number.POSITIVE_INFINITY },
    );
    this.subs.set(id, sub);
    sub.done.then(
      () => this.subs.delete(id),
      (err: unknown) => {
        this.subs.delete(id);
        const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
        this.sink.ended({ subscription: id, session, message: e.message, code: e.code, ...(e.hint ? { hint: e.hint } : {}) });
      },
    );
    return id;
  }

  close(id: string): boolean {
    const sub = this.subs.get(id);
    if (!sub) return false;
    sub.close();
    this.subs.delete(id);
    return true;
  }

  closeAll(): void {
    for (const s of this.subs.values()) s.close();
    this.subs.clear();
  }
}
