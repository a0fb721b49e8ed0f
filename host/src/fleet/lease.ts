// The fleet's one reconciler: a lease in the KV bucket hutch-fleet (key
// "lease": the holder, its epoch, until when). Each server tries every
// TICK_MS: it renews a lease it holds, takes one that lapsed (or none), and
// leaves one another server holds alone. Every change is a compare-and-set
// on the key's revision, so two servers racing for a lapsed lease cannot
// both win; the epoch goes up by one at each change of holder, and what the
// leader writes (fleet/reconcile.ts) is itself a compare-and-set on what it
// read, so a leader that lost its lease mid-round writes nothing over the
// next one's decisions.
// The bucket also holds cordons ("cordon.NODE": placement skips that node).
import { check, HutchError } from "@hutch/shared";
import { Type } from "@sinclair/typebox";
import type { JetStreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { log } from "../log.ts";
import { clusterName, defaultReplicas, leaderEntries, opening } from "../store/jetstream/cluster.ts";

const logger = log.create({ service: "fleet" });

export const FLEET_BUCKET = "hutch-fleet";
/** How long a lease holds without a renewal. */
export const LEASE_MS = 10_000;
const TICK_MS = 2_000;
const OPEN_TIMEOUT_MS = 30_000;

const LeaseValue = Type.Object({ node: Type.String({ maxLength: 64 }), epoch: Type.Integer({ minimum: 1 }), until: Type.Integer() });
type LeaseValue = { node: string; epoch: number; until: number };

export async function fleetBucket(nc: NatsConnection): Promise<KV> {
  return opening(
    () => clusterName(nc),
    `the opening of KV bucket ${FLEET_BUCKET}`,
    OPEN_TIMEOUT_MS,
    () => new Kvm(nc).create(FLEET_BUCKET, { replicas: defaultReplicas(nc), history: 1 }),
  );
}

export class Lease {
  private held: { epoch: number; revision: number; until: number } | null = null;
  private timer: ReturnType<typeof setInterval> | undefined;
  private trying: Promise<void> | null = null;
  /** Called when this server takes the lease (its epoch) and when it loses it (null). */
  onChange: (epoch: number | null) => void = () => {};

  constructor(
    private readonly kv: KV,
    private readonly node: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** This server's epoch while it holds the lease (and the lease has not lapsed by its own clock), else null. */
  epoch(): number | null {
    return this.held && this.held.until > this.now() ? this.held.epoch : null;
  }

  /** Which node holds the lease now (null: none, or it lapsed). */
  async holder(): Promise<string | null> {
    const e = await this.kv.get("lease");
    if (e?.operation !== "PUT") return null;
    const v: unknown = e.json();
    return check(LeaseValue, v) && v.until > this.now() ? v.node : null;
  }

  start(): void {
    const tick = () => {
      if (!this.trying) this.trying = this.round().finally(() => (this.trying = null));
    };
    tick();
    this.timer = setInterval(tick, TICK_MS);
  }

  /** Stops renewing and gives the lease up, so another server takes it at once rather than after it lapses. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.trying?.catch(() => undefined);
    const h = this.held;
    this.set(null);
    if (h) await this.kv.update("lease", JSON.stringify({ node: this.node, epoch: h.epoch, until: 0 }), h.revision).catch(() => undefined);
  }

  /** One try: renew, take, or leave. */
  async round(): Promise<void> {
    try {
      const e = await this.kv.get("lease");
      const now = this.now();
      let cur: LeaseValue | null = null;
      if (e?.operation === "PUT") {
        const v: unknown = e.json();
        if (check(LeaseValue, v)) cur = v;
      }
      const until = now + LEASE_MS;
      if (cur && cur.node === this.node && this.held && cur.epoch === this.held.epoch) {
        const revision = await this.kv.update("lease", JSON.stringify({ ...cur, until }), e!.revision);
        this.held = { epoch: cur.epoch, revision, until };
        return;
      }
      if (cur && cur.until > now) {
        // Another holds it (or a past self of this server, whose epoch is not this one's: it lapses like any other).
        this.set(null);
        return;
      }
      const epoch = (cur?.epoch ?? 0) + 1;
      const value = JSON.stringify({ node: this.node, epoch, until });
      const revision = e ? await this.kv.update("lease", value, e.revision) : await this.kv.create("lease", value);
      this.held = null;
      this.set({ epoch, revision, until });
    } catch (err) {
      // A lost race (the revision moved) or no answer from the cluster: not the leader this round.
      if (this.held && this.held.until <= this.now()) this.set(null);
      logger.debug("lease round", { err: String(err) });
    }
  }

  private set(h: { epoch: number; revision: number; until: number } | null): void {
    const was = this.held?.epoch ?? null;
    this.held = h;
    const is = h?.epoch ?? null;
    if (was !== is) {
      if (is !== null) logger.info("this server leads the fleet's reconcile loop", { node: this.node, epoch: is });
      else logger.info("this server no longer leads the fleet's reconcile loop", { node: this.node });
      this.onChange(is);
    }
  }
}

/** Cordons: a cordoned node takes no new box (placement), and `node drain` moves its boxes off. */
export class Cordons {
  constructor(
    private readonly kv: KV,
    private readonly jsm: JetStreamManager,
  ) {}

  /** The cordoned nodes, as the bucket's leader has them: a cordon set through any server a moment ago is in the list. */
  async list(): Promise<string[]> {
    return [...(await leaderEntries(this.jsm, FLEET_BUCKET, "cordon.>")).keys()].map((k) => k.slice("cordon.".length)).sort();
  }

  async set(node: string, on: boolean): Promise<void> {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(node))
      throw new HutchError("invalid", `"${node}" is not a node name`, "list the fleet's nodes: hutch node list");
    if (on) await this.kv.put(`cordon.${node}`, JSON.stringify({ at: Date.now() }));
    else await this.kv.delete(`cordon.${node}`);
  }
}
