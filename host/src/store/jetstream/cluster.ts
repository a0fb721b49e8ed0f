// What every JetStream backend shares: the replication a fleet gets, the
// error a caller sees when the cluster does not answer, and the retry rule
// for a write whose acknowledgement was lost. A write is retried with the
// same Nats-Msg-Id, so it lands once however many times it is sent; it is
// given up only after `writeTimeoutMs`, with an error naming the cluster.
import { HutchError } from "@hutch/shared";
import {
  type JetStreamClient,
  JetStreamApiError,
  type JetStreamManager,
  jetstreamManager,
  type MsgRequest,
  type StoredMsg,
  type StreamConfig,
} from "@nats-io/jetstream";
import type { MsgHdrs, NatsConnection } from "@nats-io/transport-node";

/** JetStream's API error codes this package acts on. */
export const ApiCodes = {
  /** expected-last-subject-sequence did not hold: another writer appended first. */
  wrongLastSequence: 10071,
  streamNotFound: 10059,
  /** The cluster is between leaders; retried like no answer at all. */
  temporarilyUnavailable: 10008,
} as const;

export interface ClusterOptions {
  /** Replicas of every stream and bucket: 3 on a cluster, 1 on a single server (the default follows the server's INFO). */
  replicas?: number;
  /** How long a write keeps retrying while the cluster does not answer before it fails (default 30 s). */
  writeTimeoutMs?: number;
}

/** Each connection's cluster name as its servers last announced it. */
const announced = new WeakMap<NatsConnection, string>();

/**
 * The cluster's name as its servers announce it, or the server's URL for a
 * single server. A connection that lost its server has no INFO until it
 * reconnects: it is named as it was last announced, so the error a write
 * gets while cut off names the cluster, not the URL it last dialled.
 */
export function clusterName(nc: NatsConnection): string {
  const info = nc.info;
  if (!info) return announced.get(nc) ?? `nats at ${nc.getServer()}`;
  const name = info.cluster ?? `nats at ${nc.getServer()}`;
  announced.set(nc, name);
  return name;
}

/** 3 on a JetStream cluster, 1 on a single server. */
export function defaultReplicas(nc: NatsConnection): number {
  return nc.info?.cluster ? 3 : 1;
}

/** A refusal JetStream decided (the write did not land), as opposed to no answer (it may have). */
export function isApiError(err: unknown, code?: number): err is JetStreamApiError {
  return err instanceof JetStreamApiError && (code === undefined || err.code === code);
}

/** An API error that is a decision, not the cluster being between leaders. */
function isFinal(err: unknown): boolean {
  return isApiError(err) && err.status !== 503 && err.code !== ApiCodes.temporarilyUnavailable;
}

/**
 * The cluster did not acknowledge in time. A write that was sent may still be
 * stored when the link returns: a retry with the same idempotency key stores
 * it once.
 */
export function unavailable(cluster: string, what: string, cause: unknown): HutchError {
  return new HutchError(
    "unavailable",
    `the NATS cluster "${cluster}" did not acknowledge ${what}: ${cause instanceof Error ? cause.message : String(cause)}`,
    "check that a majority of the cluster's nats-server nodes run and this server reaches them, then retry (with the same idempotency key, so it is stored once)",
    { cluster },
  );
}

/**
 * Runs `attempt` until it settles: a JetStream API refusal is returned to
 * the caller at once (thrown), anything else (a timeout, no responders
 * while a leader is elected, a dropped connection) is retried with backoff
 * until `timeoutMs`, then thrown as `unavailable`.
 */
export async function retrying<T>(cluster: () => string, what: string, timeoutMs: number, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let wait = 25;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (isFinal(err) || err instanceof HutchError) throw err;
      if (Date.now() + wait > deadline) throw unavailable(cluster(), what, err);
      await Bun.sleep(wait);
      wait = Math.min(wait * 2, 500);
    }
  }
}

/**
 * The JetStream API of `nc`. Its first call (`$JS.API.INFO`, the check that
 * the account has JetStream) times out under load like any other, so it is
 * retried as they are.
 */
export function manager(nc: NatsConnection, timeoutMs = 30_000): Promise<JetStreamManager> {
  return retrying(
    () => clusterName(nc),
    "the JetStream API's first answer",
    timeoutMs,
    () => jetstreamManager(nc),
  );
}

/**
 * As retrying, for opening a stream or bucket that the first server to need
 * it makes: servers started together make it at once, and nats-server
 * answers a creation that raced another one "stream not found" (seen when
 * three servers opened the same bucket together), so that refusal is tried
 * again too, and the next try finds the stream the other server made.
 */
export function opening<T>(cluster: () => string, what: string, timeoutMs: number, attempt: () => Promise<T>): Promise<T> {
  return retrying(cluster, what, timeoutMs, () =>
    attempt().catch((err: unknown) => {
      if (isApiError(err, ApiCodes.streamNotFound)) throw new Error(`a creation that raced another server's: ${err.message}`);
      throw err;
    }),
  );
}

/** Stream `config.name`, made as `config` says when the cluster has none; opening(), so servers started together all get it. */
export function ensureStream(
  nc: NatsConnection,
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string },
  what: string,
  timeoutMs: number,
): Promise<void> {
  return opening(
    () => clusterName(nc),
    what,
    timeoutMs,
    async () => {
      try {
        await jsm.streams.info(config.name);
      } catch (err) {
        if (!isApiError(err, ApiCodes.streamNotFound)) throw err;
        await jsm.streams.add(config);
      }
    },
  );
}

/** A slot claim's answer when another record took the slot (or, where the caller reads again, when it cannot tell). */
export const LOST = "lost" as const;

/** Where a claim reads the record that took its slot: the stream, through its leader. */
export interface SlotReader {
  jsm: JetStreamManager;
  stream: string;
}

/**
 * Stores one record in the slot right after stream sequence `after` on
 * `subject` (a KV key's revision, a session's last record), or finds that
 * another record took it; the record's stream sequence, or LOST. Two guards,
 * because 2.9's clustered streams check expected-last-subject-sequence
 * against what is applied, not what is in flight (two racing writers can
 * both pass it): the Nats-Msg-Id names the slot (`<subject>@<after>`), and a
 * leader keeps in-flight ids, so of two racers one is stored and the other
 * is answered "duplicate"; the expectation refuses a writer whose view is
 * older than the duplicate window. A retry of this same record is answered
 * "duplicate" too: the slot's record, read through `reader`, then carries
 * this write's id in header `idHeader`. Without a reader a duplicate is
 * LOST, and the caller reads again to know.
 */
export async function claimSlot(o: {
  js: JetStreamClient;
  subject: string;
  payload: string;
  headers: MsgHdrs;
  idHeader: string;
  after: number;
  timeoutMs: number;
  retry: <T>(attempt: () => Promise<T>) => Promise<T>;
  reader?: SlotReader;
}): Promise<number | typeof LOST> {
  const { subject, after } = o;
  try {
    const ack = await o.retry(() =>
      o.js.publish(subject, o.payload, {
        msgID: `${subject}@${after}`,
        headers: o.headers,
        expect: { lastSubjectSequence: after },
        timeout: Math.min(5000, o.timeoutMs),
      }),
    );
    if (!ack.duplicate) return ack.seq;
  } catch (err) {
    if (isApiError(err, ApiCodes.wrongLastSequence)) return LOST;
    throw err;
  }
  const reader = o.reader;
  if (!reader) return LOST;
  return o.retry(async () => {
    const winner = await reader.jsm.streams.getMessage(reader.stream, nextBySubject(after + 1, subject));
    if (!winner) throw new Error(`the record after ${after} on ${subject} is not stored yet`);
    return winner.header.get(o.idHeader) === o.headers.get(o.idHeader) ? winner.seq : LOST;
  });
}

/**
 * The first message on `subject` at or after stream sequence `seq`, from the
 * stream's leader. nats-server answers `next_by_subj` on the leader's API as on
 * direct get (2.9 does); the client's type only admits it for direct get,
 * which any replica answers, possibly behind the leader.
 */
export function nextBySubject(seq: number, subject: string): MsgRequest {
  return { seq, next_by_subj: subject } as unknown as MsgRequest;
}

/**
 * Every key under `filter` (NATS wildcards) in KV bucket `bucket`, with its
 * message count, as the bucket stream's leader knows them; a deleted key is
 * there too (its marker). A consumer (kv.keys) can sit on a replica behind
 * the leader and miss a write acknowledged a moment ago.
 */
export async function leaderKeys(jsm: JetStreamManager, bucket: string, filter: string): Promise<Record<string, number>> {
  return (await leaderWindow(jsm, bucket, filter)).keys;
}

/** leaderKeys, with the stream's last sequence from the same answer (a log read goes no further). */
export async function leaderWindow(
  jsm: JetStreamManager,
  bucket: string,
  filter: string,
): Promise<{ keys: Record<string, number>; last: number }> {
  const prefix = `$KV.${bucket}.`;
  const info = await jsm.streams.info(`KV_${bucket}`, { subjects_filter: `${prefix}${filter}` });
  const keys: Record<string, number> = {};
  for (const [subject, n] of Object.entries(info.state.subjects ?? {})) keys[subject.slice(prefix.length)] = n;
  return { keys, last: info.state.last_seq };
}

/**
 * The live entry of each key under `filter` in KV bucket `bucket`, from the
 * bucket stream's leader: leaderKeys, then the key's last message by the
 * stream API, which the leader answers. kv.keys's consumer and kv.get's
 * direct get (on a bucket made with allow_direct, as KV's default is) can be
 * answered by a replica behind it. Deleted and purged keys are left out.
 */
export async function leaderEntries(jsm: JetStreamManager, bucket: string, filter: string): Promise<Map<string, StoredMsg>> {
  const prefix = `$KV.${bucket}.`;
  const keys = Object.keys(await leaderKeys(jsm, bucket, filter)).sort();
  const got = await Promise.all(keys.map((k) => jsm.streams.getMessage(`KV_${bucket}`, { last_by_subj: `${prefix}${k}` })));
  const out = new Map<string, StoredMsg>();
  keys.forEach((k, i) => {
    const m = got[i];
    // A put carries no KV-Operation header; a delete or purge marker says DEL or PURGE.
    if (m && !m.header?.get("KV-Operation")) out.set(k, m);
  });
  return out;
}
