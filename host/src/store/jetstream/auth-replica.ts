// A fleet server's users, tokens, owners and shares: the registry's KV
// bucket holds them (auth.ts: one key each, tokens only as hashes), and this
// server's SQLite tables are a replica that follows the bucket's stream, as
// the session log's replica follows its stream (replica.ts). So a token made
// through any server is checked on every server from its own file, per
// request and synchronously, and a revocation made through one server closes
// the token's open sockets on every server within a moment.
//
// A write goes to the bucket first (compare-and-set, as auth.ts makes it) and
// resolves once this server's replica has applied everything the bucket held
// then. `touch` (a token's last use) stays on the server that saw the use: a
// bucket write per request would cost every request a round trip.
import type { TokenScope, UserQuota } from "@hutch/shared";
import { DeliverPolicy, jetstream, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Database } from "bun:sqlite";
import { log } from "../../log.ts";
import type { AuthStore } from "../auth.ts";
import type { AuthWriter, ShareMode, TokenRow } from "../types.ts";
import { KvAuthTables } from "./auth.ts";
import { clusterName, defaultReplicas, manager, retrying } from "./cluster.ts";
import { Bucket } from "./kv.ts";

const logger = log.create({ service: "fleet" });
const PULL = { expires: 2000, idle_heartbeat: 1000 };
/** The registry's bucket (jetstream/registry.ts's default). */
export const REGISTRY_BUCKET = "hutch-registry";

/** A key token back to its name (kv.ts `token`: safe names as they are, others `=` and base64url). */
const untoken = (t: string) => (t.startsWith("=") ? Buffer.from(t.slice(1), "base64url").toString() : t);

type TokenRecord = Omit<TokenRow, "hash"> & { hash: string };

export class AuthReplica {
  private applied = 0;
  private readonly waiting: { at: number; done: () => void }[] = [];
  private stop?: () => void;
  private running?: Promise<void>;
  /** Told of each token a record revoked (wherever it was revoked). */
  revoked?: (tokenId: string) => void;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly store: AuthStore,
    private readonly db: Database,
    private readonly stream: string,
    private readonly writeTimeoutMs: number,
  ) {}

  /** The replica, caught up with the bucket as it was when opened. */
  static async open(nc: NatsConnection, store: AuthStore, db: Database, stream: string, writeTimeoutMs = 30_000): Promise<AuthReplica> {
    const r = new AuthReplica(nc, await manager(nc), store, db, stream, writeTimeoutMs);
    r.running = r.follow();
    await r.fresh();
    return r;
  }

  /** Resolves once the replica has applied every record the bucket held when this was called. */
  async fresh(): Promise<void> {
    const last = await retrying(
      () => clusterName(this.nc),
      "a read of the registry",
      this.writeTimeoutMs,
      async () => (await this.jsm.streams.info(this.stream)).state.last_seq,
    );
    if (last <= this.applied) return;
    await new Promise<void>((done) => this.waiting.push({ at: last, done }));
  }

  async close(): Promise<void> {
    this.stop?.();
    await this.running?.catch(() => {});
    for (const w of this.waiting.splice(0)) w.done();
  }

  /**
   * Every key's latest record first (a server's file may be behind by any
   * amount, or new), then each new one as it is stored; an ordered consumer
   * made again from the last applied record after any loss.
   */
  private async follow(): Promise<void> {
    let stopped = false;
    let current: { stop(): unknown } | undefined;
    this.stop = () => {
      stopped = true;
      void current?.stop();
    };
    const js = jetstream(this.nc);
    while (!stopped) {
      try {
        const consumer = await js.consumers.get(
          this.stream,
          this.applied === 0
            ? { deliver_policy: DeliverPolicy.LastPerSubject }
            : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: this.applied + 1 },
        );
        const messages = await consumer.consume(PULL);
        current = messages;
        if (stopped) await messages.stop();
        for await (const m of messages) {
          if (m.seq <= this.applied) continue;
          const deleted = !!m.headers?.get("KV-Operation");
          this.apply(m.subject.slice(m.subject.indexOf(".", 4) + 1), deleted ? null : m.string());
          this.applied = m.seq;
          for (let i = this.waiting.length - 1; i >= 0; i--) {
            const w = this.waiting[i]!;
            if (w.at <= m.seq) {
              this.waiting.splice(i, 1);
              w.done();
            }
          }
        }
      } catch (err) {
        if (stopped) return;
        logger.warn("the registry's replica lost its place in the bucket; following again", { err: String(err) });
        await Bun.sleep(500);
      }
    }
  }

  /** One key's record (null: deleted) into this server's tables; keys of other kinds (boxes, policies) are not this replica's. */
  private apply(key: string, json: string | null): void {
    const [kind, a, b] = key.split(".");
    if (!a) return;
    const value = json ? (JSON.parse(json) as Record<string, unknown>) : null;
    this.db
      .transaction(() => {
        if (kind === "user" && value)
          this.store.applyUser(String(value.name), String(value.created_at), (value.quota as UserQuota | undefined) ?? null);
        else if (kind === "token" && value) {
          const t = value as unknown as TokenRecord;
          const row: TokenRow = { ...t, hash: new Uint8Array(Buffer.from(t.hash, "base64")) };
          if (this.store.applyToken(row)) this.revoked?.(row.id);
        } else if (kind === "owner") this.store.applyOwner(untoken(a), value ? String(value.owner) : null);
        else if (kind === "snapowner") this.store.applySnapshotOwner(untoken(a), value ? String(value.owner) : null);
        else if (kind === "share" && b) this.store.applyShare(untoken(a), untoken(b), value ? (value.mode as ShareMode) : null);
      })
      .immediate();
  }
}

/** The auth service's writer in a fleet: the bucket's compare-and-set writes, each resolved once this server's replica shows it. */
export class FleetAuthWriter implements AuthWriter {
  readonly shared = true;

  constructor(
    private readonly kv: KvAuthTables,
    private readonly replica: AuthReplica,
  ) {}

  private async shown<T>(write: Promise<T>): Promise<T> {
    const out = await write;
    await this.replica.fresh();
    return out;
  }

  addUser(name: string): Promise<boolean> {
    return this.shown(this.kv.addUser(name));
  }

  setQuota(name: string, quota: UserQuota | null): Promise<boolean> {
    return this.shown(this.kv.setQuota(name, quota));
  }

  insertToken(id: string, user: string, hash: Uint8Array, scopes: TokenScope[], expiresAt: number | null): Promise<TokenRow> {
    return this.shown(this.kv.insertToken(id, user, hash, scopes, expiresAt));
  }

  revoke(id: string): Promise<boolean> {
    return this.shown(this.kv.revoke(id));
  }

  setSnapshotOwner(snapId: string, owner: string): Promise<void> {
    return this.shown(this.kv.setSnapshotOwner(snapId, owner));
  }

  share(boxId: string, user: string, mode: ShareMode): Promise<void> {
    return this.shown(this.kv.share(boxId, user, mode));
  }

  unshare(boxId: string, user: string): Promise<boolean> {
    return this.shown(this.kv.unshare(boxId, user));
  }
}

/** Opens the registry's bucket on `nc` and this server's replica of its users, tokens, owners and shares, caught up. */
export async function openAuthReplica(
  nc: NatsConnection,
  store: AuthStore,
  db: Database,
  writeTimeoutMs = 30_000,
): Promise<{ writer: FleetAuthWriter; replica: AuthReplica; close(): Promise<void> }> {
  const bucket = await Bucket.open(nc, REGISTRY_BUCKET, defaultReplicas(nc), writeTimeoutMs);
  const replica = await AuthReplica.open(nc, store, db, bucket.stream, writeTimeoutMs);
  return { writer: new FleetAuthWriter(new KvAuthTables(bucket), replica), replica, close: () => replica.close() };
}
