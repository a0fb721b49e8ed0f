// The extension's subscriptions (one per open log view): from a seq on,
// batched into hutch/events notifications. They read through the bridge's
// one subscription per session (tails.ts), the one its watcher uses too.
// Awaiting each send pushes back on the daemon socket, so a slow editor slows
// the stream instead of growing the bridge.
import type { EventsNotification, SessionEvent, SubscriptionEnded } from "@hutch/shared";
import type { SessionTails } from "./tails.ts";

const BATCH = 1000;

export interface SubscriptionSink {
  events(n: EventsNotification): Promise<void>;
  ended(n: SubscriptionEnded): void;
}

export class ClientSubscriptions {
  private readonly subs = new Map<string, () => void>();
  private counter = 0;

  constructor(
    private readonly tails: SessionTails,
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
      sending = sending.then(() =>
        this.sink.events({ subscription: id, session, events, ...(caughtUp !== undefined ? { caughtUp } : {}) }),
      );
      return sending;
    };
    const stop = this.tails.read(session, from, {
      event: async (e) => {
        batch.push(e);
        if (batch.length >= BATCH) return flush();
        // Events that arrive together (one socket message, one page) are sent together.
        if (!scheduled) {
          scheduled = true;
          setImmediate(() => {
            scheduled = false;
            void flush();
          });
        }
      },
      caughtUp: (seq) => void flush(seq),
      ended: (e) => {
        this.subs.delete(id);
        this.sink.ended({ subscription: id, session, message: e.message, code: e.code, ...(e.hint ? { hint: e.hint } : {}) });
      },
    });
    this.subs.set(id, stop);
    return id;
  }

  close(id: string): boolean {
    const stop = this.subs.get(id);
    if (!stop) return false;
    stop();
    this.subs.delete(id);
    return true;
  }

  closeAll(): void {
    for (const stop of this.subs.values()) stop();
    this.subs.clear();
  }
}
