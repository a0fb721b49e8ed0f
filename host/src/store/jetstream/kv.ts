// One KV bucket of JSON values, written by compare-and-set on each key's
// revision. kv.update alone is not enough on nats-server 2.9: its clustered
// streams check the expected last subject sequence against what is applied,
// not what is in flight, so two writers racing from one revision can both
// pass it (see store/README.md). So every conditional write also names its
// slot in its Nats-Msg-Id (`<subject>@<revision it follows>`): of two racers
// the leader stores one and answers the other "duplicate". A write whose
// answer is unclear reports LOST, and callers read again and find out; each
// caller's re-read recognises its own write, so a lost acknowledgement never
// applies a change twice.
//
// The bucket is made without direct get, so every read goes to its stream's
// leader and sees every write acknowledged before it began.
import { type JetStreamClient, type JetStreamManager, type JsMsg, jetstream } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { claimSlot, clusterName, LOST, leaderKeys, leaderWindow, manager, opening, retrying } from "./cluster.ts";

/** A write's answer when another writer took the slot first (or the answer was unclear): read again. */
export { LOST };

/** The writer's id for one write, the same on every retry of it. */
const WRITE = "Hutch-Write";
const KV_OPERATION = "KV-Operation";

/** A key's live value and the revision a compare-and-set on it names. */
export interface Entry<T> {
  value: T;
  revision: number;
  created: Date;
}

/** A key's state: its live entry (or null), and the revision a write on top names (0 when never written, else its last: a value or a delete marker). */
export interface Slot<T> {
  live: Entry<T> | null;
  after: number;
}

/**
 * Key tokens: ids and names that are already safe stay as they are (so
 * `nats kv ls` reads well); anything else is `=` and its base64url, which no
 * safe token contains, so the two never collide.
 */
export function token(s: string): string {
  return /^[A-Za-z0-9_-]+$/.test(s) ? s : `=${Buffer.from(s).toString("base64url")}`;
}

export class Bucket {
  private readonly cluster: string;

  private constructor(
    private readonly kv: KV,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly name: string,
    private readonly writeTimeoutMs: number,
    nc: NatsConnection,
  ) {
    this.cluster = clusterName(nc);
  }

  /** The bucket `name`, made with `replicas` when missing. */
  static async open(nc: NatsConnection, name: string, replicas: number, writeTimeoutMs: number): Promise<Bucket> {
    const kv = await opening(
      () => clusterName(nc),
      `the opening of KV bucket ${name}`,
      writeTimeoutMs,
      () => new Kvm(nc).create(name, { replicas, history: 1, allow_direct: false }),
    );
    return new Bucket(kv, jetstream(nc), await manager(nc), name, writeTimeoutMs, nc);
  }

  get stream(): string {
    return `KV_${this.name}`;
  }

  /** Runs a call on the cluster, retried while it does not answer; an `unavailable` HutchError naming the cluster after the write timeout. */
  retry<T>(what: string, attempt: () => Promise<T>): Promise<T> {
    return retrying(() => this.cluster, what, this.writeTimeoutMs, attempt);
  }

  async slot<T>(key: string): Promise<Slot<T>> {
    const e = await this.retry(`a read of ${key} in ${this.name}`, () => this.kv.get(key));
    if (!e) return { live: null, after: 0 };
    if (e.operation !== "PUT") return { live: null, after: e.revision };
    return { live: { value: e.json<T>(), revision: e.revision, created: e.created }, after: e.revision };
  }

  /** The key's live entry, or null (never written, or deleted). */
  async get<T>(key: string): Promise<Entry<T> | null> {
    return (await this.slot<T>(key)).live;
  }

  /** Every key under `filter` (NATS wildcards) with its message count, as the stream's leader knows them (leaderKeys). */
  private subjects(filter: string): Promise<Record<string, number>> {
    return this.retry(`a listing of ${filter} in ${this.name}`, () => leaderKeys(this.jsm, this.name, filter));
  }

  /** Every live entry under `filter`, by key. */
  async all<T>(filter: string): Promise<Map<string, Entry<T>>> {
    const keys = Object.keys(await this.subjects(filter));
    const entries = await Promise.all(keys.map((k) => this.get<T>(k)));
    const out = new Map<string, Entry<T>>();
    keys.forEach((k, i) => {
      const e = entries[i];
      if (e) out.set(k, e);
    });
    return out;
  }

  /** Every live key under `filter`. */
  async keys(filter: string): Promise<string[]> {
    return [...(await this.all(filter)).keys()];
  }

  /** Messages stored under `filter`: a log's length (a log is trimmed by purges, which leave no markers). */
  async count(filter: string): Promise<number> {
    return (await this.retry(`a count of ${filter} in ${this.name}`, () => this.window(filter))).total;
  }

  /** The leader's count of the messages under `filter`, and the stream's last sequence, from one answer. */
  private async window(filter: string): Promise<{ subject: string; total: number; last: number }> {
    const { keys, last } = await leaderWindow(this.jsm, this.name, filter);
    return { subject: `$KV.${this.name}.${filter}`, total: Object.values(keys).reduce((a, n) => a + n, 0), last };
  }

  /**
   * The messages under `subject` in stream order, none after sequence
   * `last`, read through a consumer in batches sized for the `expected`
   * count. A consumer may run on a replica behind the leader in its writes
   * or its purges (a read that overlapped a replica's applying a trim got an
   * entry the trim removed, then the ones after it): callers compare what
   * they read with the leader's window and read again when it differs.
   */
  private async readUpTo(subject: string, last: number, expected: number): Promise<JsMsg[]> {
    const out: JsMsg[] = [];
    const consumer = await this.js.consumers.get(this.stream, { filter_subjects: subject });
    for (;;) {
      const batch = await consumer.fetch({ max_messages: Math.max(1, Math.min(expected - out.length, 1000)), expires: 2000 });
      let got = 0;
      let end = false;
      for await (const m of batch) {
        got++;
        if (m.seq > last) end = true;
        else out.push(m);
        if (end || m.seq === last || m.info.pending === 0) {
          end = true;
          break;
        }
      }
      if (end || got === 0) return out;
    }
  }

  /** Stores a new key: LOST when it is live (or another create won the race). */
  async create<T>(key: string, value: T): Promise<number | typeof LOST> {
    const s = await this.slot<T>(key);
    if (s.live) return LOST;
    return this.write(key, value, s.after);
  }

  /**
   * Compare-and-set: stores `value` (null: deletes the key) only if the key's
   * revision is still `after` (0: never written). The new revision, or LOST.
   */
  async write<T>(key: string, value: T | null, after: number): Promise<number | typeof LOST> {
    const subject = `$KV.${this.name}.${key}`;
    const h = headers();
    const mine = crypto.randomUUID();
    h.set(WRITE, mine);
    if (value === null) h.set(KV_OPERATION, "DEL");
    const payload = value === null ? "" : JSON.stringify(value);
    const what = `a write of ${key} in ${this.name}`;
    return claimSlot({
      js: this.js,
      subject,
      payload,
      headers: h,
      idHeader: WRITE,
      after,
      timeoutMs: this.writeTimeoutMs,
      retry: (attempt) => this.retry(what, attempt),
      reader: { jsm: this.jsm, stream: this.stream },
    });
  }

  /** Stores `value` whatever is there (a whole-value replace nobody reads before writing). */
  async put<T>(key: string, value: T): Promise<void> {
    await this.retry(`a write of ${key} in ${this.name}`, () => this.kv.put(key, JSON.stringify(value)));
  }

  /** Deletes the key whatever it holds (it leaves a delete marker, whose revision the next create names). */
  async delete(key: string): Promise<void> {
    await this.retry(`the removal of ${key} in ${this.name}`, () => this.kv.delete(key));
  }

  /** Removes every message under `filter` but the latest `keep` (0: all): a log's bound, leaving no markers. */
  async trim(filter: string, keep: number): Promise<void> {
    const subject = `$KV.${this.name}.${filter}`;
    await this.retry(`a trim of ${filter} in ${this.name}`, () =>
      this.jsm.streams.purge(this.stream, keep > 0 ? { filter: subject, keep } : { filter: subject }),
    );
  }

  /**
   * The values under `filter` in the order they were stored (a log read
   * through a consumer, not key by key), as far as the leader's last
   * sequence when the read began; read again until it is the leader's count.
   */
  async log<T>(filter: string): Promise<T[]> {
    return this.retry(`a read of ${filter} in ${this.name}`, async () => {
      const w = await this.window(filter);
      if (w.total === 0) return [];
      const msgs = await this.readUpTo(w.subject, w.last, w.total);
      if (msgs.length !== w.total)
        throw new Error(`${filter}: read ${msgs.length} where the leader holds ${w.total}; a replica was behind`);
      return msgs.filter((m) => !m.headers?.get(KV_OPERATION)).map((m) => m.json<T>());
    });
  }
}
