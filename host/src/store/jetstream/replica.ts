// A fleet server's session log: JetStream holds it (store/jetstream/
// session-log.ts: gapless seqs by expected-last-sequence, retried appends
// landing once), and this server's SQLite file is its replica. Every server
// follows the whole stream in order and applies each record to its file in
// a transaction that also moves its bookmark (records read together share
// one), so a server serves replay, tail, listings and summaries of every
// session of the fleet from its own file, whichever server wrote them, and
// its reads stay synchronous.
//
// A write goes to JetStream first; its promise resolves once this server's
// replica has applied it (and the bus has published its events), so a caller
// reads its own write here at once. A read that must see every write the
// fleet acknowledged (a log or a watch opened through any server) first asks
// the stream for its last sequence and waits for the replica to reach it.
//
// The replica must keep following while any majority of the cluster runs:
// a consumer whose node died is given up and made again (on a live node)
// once a record known to be stored goes undelivered for a whole check, as
// the client's own recovery would wait for the dead node to return; until
// the new one delivers, the replica reads the gap from the stream's leader.
import { HutchError } from "@hutch/shared";
import { type ConsumerMessages, DeliverPolicy, type JetStreamManager, jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Database } from "bun:sqlite";
import { log } from "../../log.ts";
import type { SessionStore } from "../sessions.ts";
import type { AppendOptions, Appended, NewEvent, NewSessionRow, PublishFn, SessionFields, SessionWriter } from "../types.ts";
import { clusterName, manager, retrying } from "./cluster.ts";
import { H } from "./records.ts";
import { JetStreamSessionLog, SESSIONS_STREAM } from "./session-log.ts";

const logger = log.create({ service: "fleet" });
/** Pull requests that expire every 2 s with heartbeats: a replica whose node died notices within seconds. */
const PULL = { expires: 2000, idle_heartbeat: 1000 };
/**
 * How often a replica that applied nothing checks that it is not stalled.
 * The client makes an ordered consumer again only once it has asked the old
 * one's state, and while the node holding it is down that question gets no
 * answer: the replica would wait for that node's return, though the other
 * nodes keep the quorum and the fleet writes on.
 */
const STALL_CHECK_MS = 3000;
/** Records a stalled replica reads one request each per check, while its new consumer is made. */
const FILL_MAX = 1000;
/** An event line's bytes besides its actor and data (session id, seq, time, kind, JSON punctuation), at most. */
const EVENT_LINE_OVERHEAD = 160;
/** Room left in a record for its headers (kinds, keys, the row change). */
const RECORD_HEADROOM = 64 * 1024;
/** At most this many records in one transaction of the replica. */
const APPLY_BATCH = 256;

/** One message of the session stream, as the replica applies it. */
interface StreamRecord {
  seq: number;
  subject: string;
  h: { get(k: string): string } | undefined;
  payload: string;
}

/** This server's file as a replica of the fleet's session stream. */
export class SessionReplica {
  private applied = 0;
  private closed = false;
  private readonly waiting = new Map<number, (() => void)[]>();
  private stop?: () => void;
  private running?: Promise<void>;
  /** Where applied events are published (the session bus), once the session service exists. */
  publish?: PublishFn;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly store: SessionStore,
    private readonly db: Database,
    private readonly created: string,
    private readonly writeTimeoutMs: number,
  ) {}

  /**
   * The replica, caught up with every record the stream held when it was
   * opened (so a server serves a complete listing from its first request).
   * A bookmark of another stream (the cluster's stream was made again) starts
   * the replica from the stream's first record.
   */
  static async open(nc: NatsConnection, store: SessionStore, db: Database, writeTimeoutMs = 30_000): Promise<SessionReplica> {
    const jsm = await manager(nc);
    const info = await retrying(
      () => clusterName(nc),
      "a read of the session stream",
      writeTimeoutMs,
      () => jsm.streams.info(SESSIONS_STREAM),
    );
    const r = new SessionReplica(nc, jsm, store, db, info.created, writeTimeoutMs);
    const mark = db.query("SELECT created, applied FROM replicas WHERE stream = ?").get(SESSIONS_STREAM) as {
      created: string;
      applied: number;
    } | null;
    if (mark && mark.created === info.created) r.applied = mark.applied;
    else if (mark) logger.warn("the fleet's session stream was made again: its records are applied from the first", { was: mark.created });
    r.running = r.follow();
    // Catching up may take longer than a write's bound (a new server of a long-lived fleet): no bound here.
    await r.caughtUp(info.state.last_seq);
    return r;
  }

  /** Resolves once the replica has applied the stream's record `seq`, however long that takes. */
  private caughtUp(seq: number): Promise<void> {
    if (seq <= this.applied) return Promise.resolve();
    return new Promise((resolve) => this.whenApplied(seq, resolve));
  }

  /** Calls `waiter` once record `seq` is applied (or the replica closes). */
  private whenApplied(seq: number, waiter: () => void): void {
    const list = this.waiting.get(seq) ?? [];
    list.push(waiter);
    this.waiting.set(seq, list);
  }

  /**
   * Resolves once the replica has applied the stream's record `seq`. A
   * replica that cannot apply (a record its file refuses, a full disk) is
   * not waited on for ever: once it has applied nothing for the write
   * timeout plus the two stall checks its own recovery takes (a consumer on
   * a dead node is replaced after two), this rejects with an `unavailable`
   * error saying how far behind it is, beginning with `what` (a write says
   * the fleet has it: it is not lost, and a retry with its idempotency key
   * lands once). A replica still applying is waited for.
   */
  reach(seq: number, what = "this read"): Promise<void> {
    if (seq <= this.applied) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const bound = this.writeTimeoutMs + 2 * STALL_CHECK_MS;
      let at = this.applied;
      let timer: Timer;
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      const check = () => {
        if (this.applied !== at) {
          at = this.applied;
          timer = setTimeout(check, bound);
          return;
        }
        const left = (this.waiting.get(seq) ?? []).filter((w) => w !== done);
        if (left.length > 0) this.waiting.set(seq, left);
        else this.waiting.delete(seq);
        reject(
          new HutchError(
            "unavailable",
            `${what}: this server's copy of the fleet's session log is behind the cluster (record ${this.applied} applied of ${seq}, none for ${bound / 1000} s)`,
            "read through another server of the fleet; this server's log says why its copy stopped",
          ),
        );
      };
      timer = setTimeout(check, bound);
      this.whenApplied(seq, done);
    });
  }

  /**
   * Resolves once the replica has every record the stream had when this was
   * called. A read of one session waits for the stream's last record too,
   * not the session's: the stream leader answers "the session's last" with
   * the whole record (a batch of 1,000 events is ~270 KB of base64 in
   * JSON), and a paged replay asks once a page, where the stream's state is
   * a small answer. The replica applies every session's records in stream
   * order, so waiting for the stream's last is waiting for the session's
   * and for what other sessions wrote since, which it applies anyway.
   */
  async fresh(): Promise<void> {
    const last = await retrying(
      () => clusterName(this.nc),
      "a read of the session stream",
      this.writeTimeoutMs,
      async () => (await this.jsm.streams.info(SESSIONS_STREAM)).state.last_seq,
    );
    await this.reach(last);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stop?.();
    await this.running?.catch(() => {});
    for (const list of this.waiting.values()) for (const w of list) w();
    this.waiting.clear();
  }

  /** Applies the stream's records in order, for as long as the replica is open; an ordered consumer is made again after any loss. */
  private async follow(): Promise<void> {
    let stopped = false;
    let current: { stop(): unknown } | undefined;
    // Stopping the messages ends the wait below, which makes a new consumer from the last record applied.
    const watchdog = this.watchStalls(() => void current?.stop());
    this.stop = () => {
      stopped = true;
      watchdog();
      void current?.stop();
    };
    const js = jetstream(this.nc);
    while (!stopped) {
      try {
        const consumer = await js.consumers.get(SESSIONS_STREAM, {
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: this.applied + 1,
        });
        // The client hands each message over as it reads it off the socket; those of one read are applied
        // together once it is done (a microtask later): a burst costs one commit, a lone record no wait.
        let batch: StreamRecord[] = [];
        let failed = false;
        let messages: ConsumerMessages | undefined;
        const flush = () => {
          const records = batch;
          batch = [];
          if (records.length === 0 || failed || stopped) return;
          try {
            this.apply(records);
          } catch (err) {
            // Nothing after the record that failed is applied: the next consumer starts from the bookmark.
            failed = true;
            messages?.stop(err instanceof Error ? err : new Error(String(err)));
          }
        };
        messages = await consumer.consume({
          ...PULL,
          callback: (m) => {
            if (failed || m.seq <= (batch.at(-1)?.seq ?? this.applied)) return;
            if (batch.push({ seq: m.seq, subject: m.subject, h: m.headers, payload: m.string() }) === 1) queueMicrotask(flush);
            else if (batch.length >= APPLY_BATCH) flush();
          },
        });
        current = messages;
        if (stopped) await messages.stop();
        const err = await messages.closed();
        if (err) throw err;
      } catch (err) {
        if (stopped) return;
        logger.warn("the session replica lost its place in the stream; following again", { err: String(err) });
        await Bun.sleep(500);
      }
    }
  }

  /**
   * Calls `restart` when a record known to be stored (the stream's last, or
   * one a write through this server waits for) is still not applied a whole
   * check later, and nothing else was applied meanwhile, and reads the gap
   * itself meanwhile; returns a stop.
   */
  private watchStalls(restart: () => void): () => void {
    let seen = this.applied;
    let due = 0;
    let busy = false;
    const timer = setInterval(async () => {
      if (busy) return;
      if (this.applied !== seen) {
        seen = this.applied;
        due = 0;
        return;
      }
      busy = true;
      try {
        if (due > this.applied) {
          logger.warn("the session replica stalled; following again from a new consumer", { applied: this.applied, stored: due });
          restart();
          // A new consumer can land on the dead node too (its creation then times out); the stream's leader answers reads meanwhile.
          await this.fill(due);
          seen = this.applied;
          due = 0;
          return;
        }
        const last = await this.jsm.streams.info(SESSIONS_STREAM).then(
          (info) => info.state.last_seq,
          () => 0,
        );
        due = Math.max(last, ...this.waiting.keys());
      } catch (err) {
        // A record this file refuses: nothing after it is applied, writes waiting on it are refused at their bound.
        logger.warn("the session replica could not apply the records it read", { applied: this.applied, err: String(err) });
      } finally {
        busy = false;
      }
    }, STALL_CHECK_MS);
    return () => clearInterval(timer);
  }

  /** Applies the records after the last applied, up to `to` (at most FILL_MAX), one read each, for as long as the stream answers. */
  private async fill(to: number): Promise<void> {
    const end = Math.min(to, this.applied + FILL_MAX);
    while (!this.closed && this.applied < end) {
      const seq = this.applied + 1;
      const m = await this.jsm.streams.getMessage(SESSIONS_STREAM, { seq }).catch(() => null);
      if (!m) return;
      // The consumer may have applied it while this read was on its way.
      if (!this.closed && m.seq === this.applied + 1) this.apply([{ seq: m.seq, subject: m.subject, h: m.header, payload: m.string() }]);
    }
  }

  /**
   * Records in stream order, applied with the bookmark in one transaction;
   * then their events published and their waiters woken. When one of several
   * fails, they are applied one at a time, so those before it land and the
   * replica stops at the one that failed.
   */
  private apply(records: StreamRecord[]): void {
    const published: { id: string; seq: number; json: string; kind: string }[] = [];
    const last = records.at(-1)!.seq;
    try {
      this.db
        .transaction(() => {
          for (const r of records) this.applyOne(r, published);
          this.db
            .query(
              "INSERT INTO replicas (stream, created, applied) VALUES (?, ?, ?) ON CONFLICT (stream) DO UPDATE SET created = ?2, applied = ?3",
            )
            .run(SESSIONS_STREAM, this.created, last);
        })
        .immediate();
    } catch (err) {
      if (records.length === 1) throw err;
      for (const r of records) this.apply([r]);
      return;
    }
    this.applied = last;
    for (const e of published) this.publish?.(e.id, e.seq, e.json, e.kind);
    for (const [at, list] of this.waiting) {
      if (at > last) continue;
      this.waiting.delete(at);
      for (const w of list) w();
    }
  }

  /** One record's change to the file, inside apply's transaction; the events it stored are added to `published`. */
  private applyOne(r: StreamRecord, published: { id: string; seq: number; json: string; kind: string }[]): void {
    const id = r.subject.slice(r.subject.lastIndexOf(".") + 1);
    const h = r.h;
    const kind = h?.get(H.record);
    if (kind === "row") {
      if (!this.store.get(id)) this.store.insert(JSON.parse(h!.get(H.row)) as NewSessionRow);
      return;
    }
    if (!this.store.get(id)) return;
    if (kind === "events") {
      const keys = h!.get(H.keys);
      for (const e of this.store.applyBatch(id, Number(h!.get(H.seq)), r.payload.split("\n"), keys ? JSON.parse(keys) : []))
        published.push({ id, ...e });
    }
    const fields = h?.get(H.fields);
    if (fields) this.store.update(id, JSON.parse(fields) as SessionFields);
  }
}

/** The session writer of a fleet server: JetStream's log, each write resolved once this server's replica shows it. */
export class ClusterWriter implements SessionWriter {
  readonly shared = true;

  constructor(
    private readonly log: JetStreamSessionLog,
    private readonly replica: SessionReplica,
    /** The largest message the cluster takes (its max_payload): an append is one record, so its events must fit in one. */
    private readonly maxPayload = 1024 * 1024,
  ) {}

  async insert(row: NewSessionRow): Promise<void> {
    await this.log.insert(row);
    await this.replica.reach(this.log.streamSeqOf(row.id), `the fleet stored session ${row.id}`);
  }

  async append(sessionId: string, events: NewEvent[], options?: AppendOptions): Promise<Appended[]> {
    // Refused at once, naming the limit: a record the cluster cannot take would be retried until the write timeout.
    const size = events.reduce((n, e) => n + EVENT_LINE_OVERHEAD + JSON.stringify(e.data).length + JSON.stringify(e.actor).length, 0);
    if (size > this.maxPayload - RECORD_HEADROOM)
      throw new HutchError(
        "invalid",
        `these ${events.length} events take about ${size} bytes, more than the ${this.maxPayload}-byte message the fleet's NATS cluster takes`,
        "send them in several requests, fewer events each",
      );
    const out = await this.log.append(sessionId, events, options).catch((err) => {
      throw err instanceof Error && err.message === `session ${sessionId} does not exist`
        ? new HutchError("not_found", `no session "${sessionId}" in the fleet's log`, "list sessions: hutch session list")
        : err;
    });
    await this.replica.reach(
      this.log.streamSeqOf(sessionId),
      `the fleet stored these events of session ${sessionId} (seq ${out[0]?.seq}-${out.at(-1)?.seq})`,
    );
    return out;
  }

  async update(id: string, fields: SessionFields): Promise<void> {
    await this.log.update(id, fields);
    await this.replica.reach(this.log.streamSeqOf(id), `the fleet stored the change to session ${id}`);
  }

  fresh(): Promise<void> {
    return this.replica.fresh();
  }
}

/** Opens the fleet's session log on `nc` and this server's replica of it, caught up; the writer is made once its listeners exist. */
export async function openSessionReplica(
  nc: NatsConnection,
  store: SessionStore,
  db: Database,
  writeTimeoutMs?: number,
): Promise<{ writer: (publish: PublishFn) => SessionWriter; close(): Promise<void> }> {
  const jsLog = await JetStreamSessionLog.open(nc, writeTimeoutMs ? { writeTimeoutMs } : {});
  const replica = await SessionReplica.open(nc, store, db, writeTimeoutMs);
  return {
    writer: (publish) => {
      replica.publish = publish;
      return new ClusterWriter(jsLog, replica, nc.info?.max_payload);
    },
    close: () => replica.close(),
  };
}
