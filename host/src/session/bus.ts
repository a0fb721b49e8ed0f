// Live fan-out of committed events to subscribers, per session. Publishing
// happens after the transaction that stored the event, so a subscriber never
// sees an event that is not durable.
export type Listener = (seq: number, json: string) => void;

export type AnyListener = (session: string, kind: string) => void;

export class SessionBus {
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly anyListeners = new Set<AnyListener>();

  /** Hears the kind of every event of every session (the change feed). */
  subscribeAll(fn: AnyListener): () => void {
    this.anyListeners.add(fn);
    return () => this.anyListeners.delete(fn);
  }

  subscribe(session: string, fn: Listener): () => void {
    let set = this.listeners.get(session);
    if (!set) {
      set = new Set();
      this.listeners.set(session, set);
    }
    set.add(fn);
    return () => {
      set!.delete(fn);
      if (set!.size === 0) this.listeners.delete(session);
    };
  }

  publish(session: string, seq: number, json: string, kind: string): void {
    for (const fn of this.anyListeners) fn(session, kind);
    const set = this.listeners.get(session);
    if (!set) return;
    for (const fn of set) fn(seq, json);
  }
}
