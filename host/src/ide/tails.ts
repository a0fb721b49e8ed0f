// One daemon subscription per session for the whole bridge, shared by every
// reader of that session (its watcher, an open log view). A reader that starts
// before where the subscription is reads the missing part as pages of the log,
// then joins it; each reader gets every event from its start once, in seq
// order. The subscription starts where its first reader does and ends with
// its last reader; a few open at a time, so a start with hundreds of open
// sessions does not hold the sidebar's own requests up behind them.
import { HutchError, type EventsPage, type SessionEvent } from "@hutch/shared";
import type { DaemonClient } from "../client/daemon.ts";
import { subscribe, type Subscription } from "../client/subscribe.ts";

export interface TailHandlers {
  /** Events in seq order, each once; awaited before the next. */
  event(e: SessionEvent): void | Promise<void>;
  /** The reader has everything up to the live end of the log. */
  caughtUp?(seq: number): void;
  /** The session cannot be read (gone, or not ours to see). */
  ended?(err: HutchError): void;
}

interface Reader {
  next: number;
  /** Reading pages of the log, not yet taking events from the subscription. */
  paging: boolean;
  caught: boolean;
  closed: boolean;
  h: TailHandlers;
}

class Tail {
  readonly readers = new Set<Reader>();
  /** The subscription reached the live end once. */
  live = false;
  /** The next seq the subscription delivers. */
  next: number;
  sub: Subscription | null = null;
  closed = false;

  constructor(
    readonly session: string,
    from: number,
  ) {
    this.next = from;
  }

  close(): void {
    this.closed = true;
    this.sub?.close();
  }
}

const PAGE = 10_000;
const RETRY_MS = 300;
/** Subscriptions between their first request and catching up, at most. */
const OPENING = 4;

export class SessionTails {
  private readonly tails = new Map<string, Tail>();
  private readonly waiting: Tail[] = [];
  private opening = 0;

  constructor(private readonly daemon: DaemonClient) {}

  /** Reads the session from `from` on; returns what stops this reader. */
  read(session: string, from: number, h: TailHandlers): () => void {
    const reader: Reader = { next: Math.max(1, from), paging: false, caught: false, closed: false, h };
    const tail = this.tails.get(session) ?? this.open(session, reader.next);
    tail.readers.add(reader);
    if (reader.next < tail.next) void this.page(tail, reader);
    else if (tail.live) this.caughtUp(reader, reader.next - 1);
    return () => this.drop(tail, reader);
  }

  closeAll(): void {
    for (const t of this.tails.values()) t.close();
    this.tails.clear();
    this.waiting.length = 0;
  }

  private open(session: string, from: number): Tail {
    const tail = new Tail(session, from);
    this.tails.set(session, tail);
    this.waiting.push(tail);
    this.startWaiting();
    return tail;
  }

  /** Starts waiting subscriptions while fewer than OPENING are between their request and their catching up. */
  private startWaiting(): void {
    while (this.opening < OPENING) {
      const tail = this.waiting.shift();
      if (!tail) return;
      if (tail.closed) continue;
      this.opening++;
      let opened = false;
      const settle = () => {
        if (opened) return;
        opened = true;
        this.opening--;
        this.startWaiting();
      };
      tail.sub = subscribe(
        this.daemon,
        tail.session,
        tail.next,
        {
          event: async (e) => {
            tail.next = e.seq + 1;
            for (const r of [...tail.readers]) await this.deliver(tail, r, e);
          },
          caughtUp: (seq) => {
            settle();
            tail.live = true;
            for (const r of tail.readers) if (!r.paging && r.next > seq) this.caughtUp(r, seq);
          },
        },
        { reconnectForMs: Number.POSITIVE_INFINITY },
      );
      tail.sub.done.then(settle, (err: unknown) => {
        settle();
        const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
        if (this.tails.get(tail.session) === tail) this.tails.delete(tail.session);
        for (const r of tail.readers) this.end(r, e);
        tail.readers.clear();
      });
    }
  }

  private async deliver(tail: Tail, r: Reader, e: SessionEvent): Promise<void> {
    if (r.closed || r.paging || e.seq < r.next) return;
    if (e.seq > r.next) {
      // Only a reader that joined ahead of the subscription can see a gap: it reads the gap as pages.
      void this.page(tail, r);
      return;
    }
    r.next = e.seq + 1;
    await r.h.event(e);
  }

  /** Reads pages of the log from the reader's next seq until it meets the subscription. */
  private async page(tail: Tail, r: Reader): Promise<void> {
    if (r.paging) return;
    r.paging = true;
    const path = `/v1/sessions/${encodeURIComponent(tail.session)}/events`;
    while (!r.closed) {
      // Checked and switched in one step: the subscription's next event after this is the reader's.
      if (r.next >= tail.next) {
        r.paging = false;
        if (tail.live) this.caughtUp(r, r.next - 1);
        return;
      }
      let page: EventsPage;
      try {
        page = await this.daemon.request("GET", `${path}?from=${r.next}&limit=${Math.min(PAGE, tail.next - r.next)}`);
      } catch (err) {
        const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
        if (e.code !== "unavailable") return this.end(r, e);
        // The daemon is away: the subscription waits for it too.
        await Bun.sleep(RETRY_MS);
        continue;
      }
      if (page.events.length === 0) await Bun.sleep(RETRY_MS);
      for (const e of page.events) {
        if (r.closed) return;
        if (e.seq !== r.next) continue;
        r.next = e.seq + 1;
        await r.h.event(e);
      }
    }
  }

  private caughtUp(r: Reader, seq: number): void {
    if (r.caught || r.closed) return;
    r.caught = true;
    r.h.caughtUp?.(seq);
  }

  private end(r: Reader, err: HutchError): void {
    if (r.closed) return;
    r.closed = true;
    r.h.ended?.(err);
  }

  private drop(tail: Tail, r: Reader): void {
    r.closed = true;
    tail.readers.delete(r);
    if (tail.readers.size === 0 && this.tails.get(tail.session) === tail) {
      this.tails.delete(tail.session);
      tail.close();
    }
  }
}
