// Live fan-out of committed events to subscribers, per session. Publishing
// happens after the transaction that stored the event, so a subscriber never
// sees an event that is not durable.
export type Listener = (seq: number, json: string) => void;

export class SessionBus {
  private readonly listeners = new Map<string, Set<Listener>>();

  subscribe(session: string, fn: Listener): () => void {
    let set = this.listeners.get(session);
    if (!set) this.listeners.set(session, (set = new Set()));
    set.add(fn);
    return () => {
      set!.delete(fn);
      if (set!.size === 0) this.listeners.delete(session);
    };
  }

  publish(session: string, seq: number, json: string): void {
    const set = this.listeners.get(session);
    if (!set) return;
    for (const fn of set) fn(seq, json);
  }
}
