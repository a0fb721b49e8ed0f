// The session log on JetStream: one stream, one subject per session, every
// change to a session (its row, each batch of events, each row change) one
// message on that subject. Two writers can never interleave: each record
// claims the slot after the last record its writer folded (expected last
// subject sequence, and a Nats-Msg-Id naming the slot: see claim()), so of two
// writers at the same seq one is stored and the other is refused, folds what
// it missed and tries again. A retry resends the same record under the same
// message id, so a write whose acknowledgement was lost lands once.
//
// Each handle folds the records it reads into the session's state (records.ts)
// and keeps it; a read first asks the stream leader for the subject's last
// sequence, so it sees every write acknowledged before it began.
import { HutchError } from "@hutch/shared";
import {
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { headers, type MsgHdrs, type NatsConnection, nanos } from "@nats-io/transport-node";
import { staleLast } from "../session-log-async.ts";
import { eventHead, eventLine } from "../sessions.ts";
import type {
  AppendOptions,
  Appended,
  NewEvent,
  NewSessionRow,
  SessionFields,
  SessionLogAsync,
  SessionRow,
  StoredLine,
  TextPage,
} from "../types.ts";
import {
  claimSlot,
  type ClusterOptions,
  clusterName,
  defaultReplicas,
  ensureStream,
  LOST,
  manager,
  nextBySubject,
  retrying,
} from "./cluster.ts";
import { type Batch, batchOf, type Folded, fold, H } from "./records.ts";

export const SESSIONS_STREAM = "HUTCH_SESSIONS";
const PREFIX = "hutch.session";
/** Records a catch-up reads one request each before it opens a consumer (a consumer costs several requests). */
const STEPS = 32;
/**
 * Pull requests that expire, with heartbeats, every 2 s: an ordered consumer
 * whose server died or whose stream changed leader notices within seconds and
 * is made again from the last record it delivered (the default waits 30 s).
 */
const PULL = { expires: 2000, idle_heartbeat: 1000 };
/** Batches fetched one request each, in parallel; past this a read streams them through a consumer. */
const PARALLEL_GETS = 32;
/** How long JetStream remembers a Nats-Msg-Id: a retry within it lands once. */
const DUPLICATE_WINDOW_MS = 120_000;
const TOKEN = /^[A-Za-z0-9_-]+$/;

/**
 * A gathering stops taking appends at this many bytes of event lines (a
 * quarter of NATS's default 1 MiB message), so appends that each fit a
 * message never make one too large together; a larger append is a record
 * of its own, as it would be alone.
 */
const GATHER_BYTES = 256 * 1024;
/** An event line's bytes besides its data: session, seq, time, actor, kind. */
const LINE_OVERHEAD = 160;

/** Appends waiting to be stored together, each with its resolution. */
interface Gathering {
  calls: { events: NewEvent[]; data: string[]; resolve(r: Appended[]): void; reject(err: unknown): void }[];
  bytes: number;
}

const copy = (row: SessionRow): SessionRow => ({ ...row });

/** A new record's headers: its kind, and an id its writer knows it again by. */
function record(kind: "row" | "events" | "fields"): MsgHdrs {
  const h = headers();
  h.set(H.record, kind);
  h.set(H.append, crypto.randomUUID());
  return h;
}

export class JetStreamSessionLog implements SessionLogAsync {
  /** Writes refused because another writer stored first, each followed by a fold and a retry (for tests and metrics). */
  readonly stats = { conflicts: 0 };
  private readonly cache = new Map<string, Folded>();
  private readonly locks = new Map<string, Promise<void>>();
  /** Each session's appends still gathering for the record after the one being written (see append). */
  private readonly gathering = new Map<string, Gathering>();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly writeTimeoutMs: number,
  ) {
    // Named once while connected: an error while cut off names the cluster it was (cluster.ts).
    clusterName(nc);
  }

  /** A log on this connection; makes the stream when the cluster has none (replicas as `options` say). */
  static async open(nc: NatsConnection, options: ClusterOptions = {}): Promise<JetStreamSessionLog> {
    const writeTimeoutMs = options.writeTimeoutMs ?? 30_000;
    const jsm = await manager(nc);
    const log = new JetStreamSessionLog(nc, jetstream(nc), jsm, writeTimeoutMs);
    await ensureStream(
      nc,
      jsm,
      {
        name: SESSIONS_STREAM,
        subjects: [`${PREFIX}.*`],
        num_replicas: options.replicas ?? defaultReplicas(nc),
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        duplicate_window: nanos(DUPLICATE_WINDOW_MS),
      },
      "the session stream's creation",
      writeTimeoutMs,
    );
    return log;
  }

  async insert(row: NewSessionRow): Promise<void> {
    const subject = this.subject(row.id);
    await this.locked(row.id, async () => {
      const h = record("row");
      h.set(H.row, JSON.stringify(row));
      const seq = await this.claim(`the creation of session ${row.id}`, subject, h, "", 0);
      if (seq === LOST) throw new HutchError("conflict", `session id ${row.id} is taken`, "make the session again: it gets a new id");
      this.cache.set(row.id, fold(undefined, h, seq)!);
    });
  }

  async get(id: string): Promise<SessionRow | null> {
    const f = await this.sync(id);
    return f ? copy(f.row) : null;
  }

  async list(filter: { boxId?: string; state?: string } = {}): Promise<SessionRow[]> {
    const info = await this.retry("a listing of sessions", () =>
      this.jsm.streams.info(SESSIONS_STREAM, { subjects_filter: `${PREFIX}.*` }),
    );
    const ids = Object.keys(info.state.subjects ?? {}).map((s) => s.slice(PREFIX.length + 1));
    const folded = (await Promise.all(ids.map((id) => this.sync(id)))).filter((f): f is Folded => !!f);
    return folded
      .filter((f) => (!filter.boxId || f.row.box_id === filter.boxId) && (!filter.state || f.row.state === filter.state))
      .sort((a, b) => (a.row.created_at < b.row.created_at ? -1 : a.row.created_at > b.row.created_at ? 1 : a.createdSeq - b.createdSeq))
      .map((f) => copy(f.row));
  }

  async expiredLeases(now: number): Promise<SessionRow[]> {
    return (await this.list({ state: "open" })).filter((r) => r.driver_expires_at !== null && r.driver_expires_at < now);
  }

  async update(id: string, fields: SessionFields): Promise<void> {
    if (Object.keys(fields).length === 0) return;
    const subject = this.subject(id);
    await this.locked(id, async () => {
      const h = record("fields");
      h.set(H.fields, JSON.stringify(fields));
      for (;;) {
        const f = this.cache.get(id) ?? (await this.sync(id));
        if (!f) return;
        const seq = await this.claim(`a change to session ${id}`, subject, h, "", f.streamSeq);
        if (seq !== LOST) {
          fold(f, h, seq);
          return;
        }
        this.stats.conflicts++;
        await this.sync(id);
      }
    });
  }

  /**
   * Appends with no options that arrive while an earlier write to their
   * session holds its lock are gathered, in call order, into the next
   * record (group commit): one claim, one message and one apply on every
   * replica for all of them, each answered with its own events' seqs. A
   * write that is not an append (or an append with options) closes the
   * gathering, so every write still lands in call order.
   */
  append(sessionId: string, events: NewEvent[], options: AppendOptions = {}): Promise<Appended[]> {
    let subject: string;
    try {
      subject = this.subject(sessionId);
    } catch (err) {
      return Promise.reject(err);
    }
    const data = events.map((e) => JSON.stringify(e.data));
    if (options.ifLast !== undefined || options.fields)
      return this.locked(sessionId, () => this.store(sessionId, subject, events, data, options));
    const bytes = data.reduce((n, d) => n + d.length + LINE_OVERHEAD, 0);
    let g = this.gathering.get(sessionId);
    if (!g || g.bytes + bytes > GATHER_BYTES) {
      const next: Gathering = { calls: [], bytes: 0 };
      void this.locked(sessionId, () => this.storeGathered(sessionId, subject, next));
      this.gathering.set(sessionId, next);
      g = next;
    }
    g.bytes += bytes;
    const { promise, resolve, reject } = Promise.withResolvers<Appended[]>();
    g.calls.push({ events, data, resolve, reject });
    return promise;
  }

  /** Stores a gathering's appends as one record and answers each with its own events' results. */
  private async storeGathered(sessionId: string, subject: string, g: Gathering): Promise<void> {
    if (this.gathering.get(sessionId) === g) this.gathering.delete(sessionId);
    try {
      const out = await this.store(
        sessionId,
        subject,
        g.calls.flatMap((c) => c.events),
        g.calls.flatMap((c) => c.data),
        {},
      );
      let at = 0;
      for (const c of g.calls) {
        c.resolve(out.slice(at, at + c.events.length));
        at += c.events.length;
      }
    } catch (err) {
      for (const c of g.calls) c.reject(err);
    }
  }

  /** One record of `events` (`data`: each one's data as JSON), under the session's lock. */
  private async store(sessionId: string, subject: string, events: NewEvent[], data: string[], options: AppendOptions): Promise<Appended[]> {
    let synced = !this.cache.has(sessionId);
    let f = this.cache.get(sessionId) ?? (await this.sync(sessionId));
    for (;;) {
      if (!f) throw new Error(`session ${sessionId} does not exist`);
      if (options.ifLast !== undefined && f.row.last_seq !== options.ifLast) {
        if (synced) throw staleLast(sessionId, options.ifLast, f.row.last_seq);
        f = await this.sync(sessionId);
        synced = true;
        continue;
      }
      const first = f.row.last_seq + 1;
      const { h, lines } = plan(sessionId, f, events, data, options.fields);
      if (!h) return resultsOf(f, events, first, []);
      const seq = await this.claim(`an append to session ${sessionId}`, subject, h, lines.join("\n"), f.streamSeq);
      if (seq !== LOST) {
        fold(f, h, seq);
        return resultsOf(f, events, first, lines);
      }
      // Another writer stored first: fold what it stored and plan again on top of it.
      this.stats.conflicts++;
      f = await this.sync(sessionId);
      synced = true;
    }
  }

  /** The stream sequence of the last record of the session this handle wrote or read (0 when none): what a replica must reach to show it. */
  streamSeqOf(sessionId: string): number {
    return this.cache.get(sessionId)?.streamSeq ?? 0;
  }

  async readText(
    sessionId: string,
    from: number,
    limit: number,
    separator = "\n",
    maxLength = Number.POSITIVE_INFINITY,
  ): Promise<TextPage> {
    const f = await this.sync(sessionId);
    const start = Math.max(from, 1);
    const end = Math.min(f?.row.last_seq ?? 0, start + limit - 1);
    if (!f || end < start) return { text: "", count: 0, last: from - 1 };
    const batches: Batch[] = [];
    for (let i = batchOf(f.batches, start); i < f.batches.length && f.batches[i]!.first <= end; i++) batches.push(f.batches[i]!);
    const payloads = await this.payloads(sessionId, batches);
    let text = "";
    let count = 0;
    page: for (const b of batches) {
      const lines = payloads.get(b.streamSeq)!;
      for (let i = 0; i < b.count; i++) {
        if (b.first + i < start || b.first + i > end) continue;
        text += (count ? separator : "") + lines[i]!;
        count++;
        if (text.length >= maxLength) break page;
      }
    }
    return { text, count, last: start + count - 1 };
  }

  async kindBefore(
    sessionId: string,
    kind: string,
    atMost: number,
    limit: number,
  ): Promise<{ seq: number; actor: string; data: string }[]> {
    const f = await this.sync(sessionId);
    if (!f || limit <= 0) return [];
    const hits: { seq: number; batch: Batch; offset: number }[] = [];
    for (let i = Math.min(batchOf(f.batches, atMost), f.batches.length - 1); i >= 0 && hits.length < limit; i--) {
      const b = f.batches[i]!;
      for (let o = b.count - 1; o >= 0 && hits.length < limit; o--)
        if (b.first + o <= atMost && b.kinds[o] === kind) hits.push({ seq: b.first + o, batch: b, offset: o });
    }
    const payloads = await this.payloads(sessionId, [...new Set(hits.map((x) => x.batch))]);
    return hits.map((x) => {
      const e = JSON.parse(payloads.get(x.batch.streamSeq)![x.offset]!) as { actor: unknown; data: unknown };
      return { seq: x.seq, actor: JSON.stringify(e.actor), data: JSON.stringify(e.data) };
    });
  }

  async last(sessionId: string): Promise<number> {
    return (await this.sync(sessionId))?.row.last_seq ?? 0;
  }

  async *follow(sessionId: string, from: number, signal: AbortSignal): AsyncIterable<StoredLine> {
    const subject = this.subject(sessionId);
    let next = Math.max(from, 1);
    const f = await this.sync(sessionId);
    const start = f && next <= f.row.last_seq ? f.batches[batchOf(f.batches, next)]!.streamSeq : (f?.streamSeq ?? 0) + 1;
    if (signal.aborted) return;
    const messages = await this.retry(`a tail of session ${sessionId}`, async () => {
      const consumer = await this.js.consumers.get(SESSIONS_STREAM, {
        filter_subjects: subject,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: start,
      });
      return consumer.consume(PULL);
    });
    const stop = () => void messages.stop();
    signal.addEventListener("abort", stop);
    try {
      for await (const m of messages) {
        if (m.headers?.get(H.record) !== "events") continue;
        const first = Number(m.headers.get(H.seq));
        const lines = linesOf(m.headers, m.string());
        for (let i = 0; i < lines.length; i++) {
          const seq = first + i;
          if (seq < next) continue;
          if (seq !== next) throw new Error(`session ${sessionId}: seq ${seq} follows ${next - 1} in the stream`);
          yield { seq, json: lines[i]! };
          next++;
          if (signal.aborted) return;
        }
      }
    } finally {
      signal.removeEventListener("abort", stop);
      await messages.stop();
    }
  }

  // --- internals ---------------------------------------------------------

  private subject(sessionId: string): string {
    if (!TOKEN.test(sessionId)) throw new HutchError("invalid", `session id ${JSON.stringify(sessionId)} is not a valid id`);
    return `${PREFIX}.${sessionId}`;
  }

  private retry<T>(what: string, attempt: () => Promise<T>): Promise<T> {
    return retrying(() => clusterName(this.nc), what, this.writeTimeoutMs, attempt);
  }

  /** Stores one record in the slot right after `after` on the subject, or finds another took it (cluster.ts claimSlot). */
  private claim(what: string, subject: string, h: MsgHdrs, payload: string, after: number): Promise<number | typeof LOST> {
    return claimSlot({
      js: this.js,
      subject,
      payload,
      headers: h,
      idHeader: H.append,
      after,
      timeoutMs: this.writeTimeoutMs,
      retry: (attempt) => this.retry(what, attempt),
      reader: { jsm: this.jsm, stream: SESSIONS_STREAM },
    });
  }

  private async message(seq: number) {
    const m = await this.retry("a read of the session stream", () => this.jsm.streams.getMessage(SESSIONS_STREAM, { seq }));
    if (!m) throw new Error(`session stream: message ${seq} is gone`);
    return m;
  }

  /** Serialises one handle's writes to a session, so it never races itself. */
  private locked<T>(sessionId: string, fn: () => Promise<T>): Promise<T> {
    // What is locked after a gathering is stored after it: later appends gather behind it, not into the earlier record.
    this.gathering.delete(sessionId);
    const prev = this.locks.get(sessionId) ?? Promise.resolve();
    const run = prev.then(fn);
    const tail = run.then(
      () => {},
      () => {},
    );
    this.locks.set(sessionId, tail);
    void tail.then(() => {
      if (this.locks.get(sessionId) === tail) this.locks.delete(sessionId);
    });
    return run;
  }

  /**
   * Folds every record of the session up to the subject's last, as the
   * stream's leader sees it now; undefined when the session has none.
   */
  private async sync(sessionId: string): Promise<Folded | undefined> {
    const subject = this.subject(sessionId);
    const tail = await this.retry("a read of the session stream", () =>
      this.jsm.streams.getMessage(SESSIONS_STREAM, { last_by_subj: subject }),
    );
    if (!tail) return undefined;
    let f = this.cache.get(sessionId);
    if (f && f.streamSeq >= tail.seq) return f;
    await this.scan(subject, (f?.streamSeq ?? 0) + 1, tail.seq, true, (h, seq) => {
      f = fold(f, h, seq);
    });
    // Two cold reads of one session fold two copies: keep the one further on (a staler one would only cost a retry).
    const cached = this.cache.get(sessionId);
    if (cached && f && cached.streamSeq >= f.streamSeq) return cached;
    if (f) this.cache.set(sessionId, f);
    return f;
  }

  /**
   * Reads the subject's records with stream sequence from..to, in order: up
   * to STEPS one request each (the usual case, a writer a few records
   * behind), the rest through an ordered consumer.
   */
  private async scan(
    subject: string,
    from: number,
    to: number,
    headersOnly: boolean,
    each: (h: MsgHdrs | undefined, seq: number, data: string) => void,
  ): Promise<void> {
    let at = from;
    for (let i = 0; i < STEPS; i++) {
      const m = await this.retry("a read of the session stream", () =>
        this.jsm.streams.getMessage(SESSIONS_STREAM, nextBySubject(at, subject)),
      );
      if (!m || m.seq > to) return;
      each(m.header, m.seq, headersOnly ? "" : m.string());
      if (m.seq >= to) return;
      at = m.seq + 1;
    }
    const messages = await this.retry("a read of the session stream", async () => {
      const consumer = await this.js.consumers.get(SESSIONS_STREAM, {
        filter_subjects: subject,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: at,
        headers_only: headersOnly,
      });
      return consumer.consume(PULL);
    });
    try {
      for await (const m of messages) {
        each(m.headers, m.seq, headersOnly ? "" : m.string());
        if (m.seq >= to) return;
      }
    } finally {
      await messages.stop();
    }
  }

  /** Each batch's lines, by stream sequence. */
  private async payloads(sessionId: string, batches: Batch[]): Promise<Map<number, string[]>> {
    const out = new Map<number, string[]>();
    if (batches.length <= PARALLEL_GETS) {
      const got = await Promise.all(batches.map((b) => this.message(b.streamSeq)));
      for (const m of got) out.set(m.seq, linesOf(m.header, m.string()));
      return out;
    }
    const wanted = new Set(batches.map((b) => b.streamSeq));
    await this.scan(this.subject(sessionId), batches[0]!.streamSeq, batches[batches.length - 1]!.streamSeq, false, (h, seq, data) => {
      if (wanted.has(seq)) out.set(seq, linesOf(h, data));
    });
    return out;
  }
}

function linesOf(h: MsgHdrs | undefined, payload: string): string[] {
  return Number(h?.get(H.count) ?? 0) > 0 ? payload.split("\n") : [];
}

/** The record an append publishes: its new events' lines (seqs after f's last) and headers; no headers when there is nothing to store. */
function plan(
  sessionId: string,
  f: Folded,
  events: NewEvent[],
  data: string[],
  fields: SessionFields | undefined,
): { h?: MsgHdrs; lines: string[] } {
  const first = f.row.last_seq + 1;
  const head = eventHead(sessionId);
  const lines: string[] = [];
  const keys: [number, string][] = [];
  const kinds: string[] = [];
  const seen = new Set<string>();
  for (const [i, e] of events.entries()) {
    const key = e.idempotencyKey;
    if (key && (f.keys.has(key) || seen.has(key))) continue;
    if (key) {
      seen.add(key);
      keys.push([lines.length, key]);
    }
    kinds.push(e.kind);
    lines.push(eventLine(head, first + lines.length, new Date().toISOString(), JSON.stringify(e.actor), e.kind, data[i]!));
  }
  const hasFields = fields && Object.keys(fields).length > 0;
  if (lines.length === 0 && !hasFields) return { lines };
  const h = record(lines.length > 0 ? "events" : "fields");
  if (lines.length > 0) {
    h.set(H.seq, String(first));
    h.set(H.count, String(lines.length));
    h.set(H.kinds, kinds.join(","));
    if (keys.length) h.set(H.keys, JSON.stringify(keys));
  }
  if (hasFields) h.set(H.fields, JSON.stringify(fields));
  return { h, lines };
}

/**
 * Each event's answer, given the batch that stored this append's new events
 * (its first seq and lines) and the folded state that includes it: a key
 * stored before answers with its first seq, not fresh.
 */
function resultsOf(f: Folded, events: NewEvent[], first: number, lines: string[]): Appended[] {
  const out: Appended[] = [];
  const seen = new Map<string, number>();
  let pos = 0;
  for (const e of events) {
    const key = e.idempotencyKey;
    const earlier = key ? (seen.get(key) ?? f.keys.get(key)) : undefined;
    if (key && earlier !== undefined && !(earlier === first + pos && !seen.has(key) && pos < lines.length)) {
      out.push({ seq: earlier, fresh: false, json: "" });
      continue;
    }
    const seq = first + pos;
    if (key) seen.set(key, seq);
    out.push({ seq, fresh: true, json: lines[pos]! });
    pos++;
  }
  return out;
}
