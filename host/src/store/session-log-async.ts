// The async form of a synchronous SessionLog (the SQLite one), so both
// backends answer to SessionLogAsync and run one contract suite. Every call
// is the sync call, resolved; `append`'s compare-and-set and row change run
// in the transaction that stores the events. `follow` replays pages, then
// waits for this wrapper's own appends or polls (another process may write
// the same file).
//
// `LocalWriter` is the session service's writer on one machine (SessionWriter
// in types.ts): the same sync calls, made at the call, each fresh event
// published once its transaction commits.
import { HutchError } from "@hutch/shared";
import { settle } from "./settle.ts";
import type {
  AppendOptions,
  Appended,
  NewEvent,
  NewSessionRow,
  PublishFn,
  SessionFields,
  SessionLog,
  SessionLogAsync,
  SessionWriter,
  StoredLine,
} from "./types.ts";

/** How long a tail waits for an append it was not told about (another process's) before it reads again. */
const POLL_MS = 200;
const PAGE = 1000;

/** A stale `ifLast`: someone appended since the writer read the session. */
export function staleLast(sessionId: string, expected: number, actual: number): HutchError {
  return new HutchError(
    "conflict",
    `session ${sessionId} moved on (last seq ${actual}, expected ${expected}): another writer appended first`,
    "read the session again and retry",
    { sessionId, expected, actual },
  );
}

export function asyncSessionLog(log: SessionLog): SessionLogAsync {
  const waiting = new Set<() => void>();
  const wake = () => {
    for (const w of waiting) w();
    waiting.clear();
  };
  const append = (sessionId: string, events: NewEvent[], options: AppendOptions = {}): Appended[] =>
    log.transaction(() => {
      if (options.ifLast !== undefined) {
        if (!log.get(sessionId)) throw new Error(`session ${sessionId} does not exist`);
        const last = log.last(sessionId);
        if (last !== options.ifLast) throw staleLast(sessionId, options.ifLast, last);
      }
      const { fields } = options;
      return log.append(sessionId, events, fields ? () => log.update(sessionId, fields) : undefined);
    });
  return {
    insert: async (row) => log.insert(row),
    get: async (id) => log.get(id),
    list: async (filter) => log.list(filter),
    expiredLeases: async (now) => log.expiredLeases(now),
    update: async (id, fields) => log.update(id, fields),
    append: async (sessionId, events, options) => {
      const out = append(sessionId, events, options);
      wake();
      return out;
    },
    readText: async (sessionId, from, limit, separator, maxLength) => log.readText(sessionId, from, limit, separator, maxLength),
    kindBefore: async (sessionId, kind, atMost, limit) => log.kindBefore(sessionId, kind, atMost, limit),
    last: async (sessionId) => log.last(sessionId),
    async *follow(sessionId: string, from: number, signal: AbortSignal): AsyncIterable<StoredLine> {
      let next = from;
      while (!signal.aborted) {
        const page = log.readText(sessionId, next, PAGE);
        if (page.count > 0) {
          for (const json of page.text.split("\n")) {
            if (signal.aborted) return;
            yield { seq: next++, json };
          }
          continue;
        }
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            waiting.delete(done);
            resolve();
          };
          const timer = setTimeout(done, POLL_MS);
          signal.addEventListener("abort", done);
          waiting.add(done);
        });
      }
    },
  };
}

/** The writer on one machine: the SQLite SessionLog, written at the call, each fresh event published when its transaction commits. */
export class LocalWriter implements SessionWriter {
  readonly shared = false;

  constructor(
    private readonly store: SessionLog,
    private readonly publish: PublishFn,
  ) {}

  insert(row: NewSessionRow): Promise<void> {
    return settle(() => this.store.insert(row));
  }

  append(sessionId: string, events: NewEvent[], options: AppendOptions = {}): Promise<Appended[]> {
    return settle(() => {
      const { store } = this;
      const results = store.transaction(() => {
        if (options.ifLast !== undefined) {
          const last = store.last(sessionId);
          if (last !== options.ifLast && store.get(sessionId)) throw staleLast(sessionId, options.ifLast, last);
        }
        const { fields } = options;
        return store.append(sessionId, events, fields ? () => store.update(sessionId, fields) : undefined);
      });
      results.forEach((r, i) => {
        if (r.fresh) this.publish(sessionId, r.seq, r.json, events[i]!.kind);
      });
      return results;
    });
  }

  update(id: string, fields: SessionFields): Promise<void> {
    return settle(() => this.store.update(id, fields));
  }

  fresh(): Promise<void> {
    return Promise.resolve();
  }
}
