// A fleet's warm pools: KV bucket hutch-pools. `want.<engine>.<image>` holds
// a pool as wanted (PoolSpec), set through any server; every server follows
// the bucket and keeps that many boxes of its own ready. `status.<node>` is
// each server's report of its pools (PoolServerStatus), put whenever one
// changes and deleted on a clean stop, so `pool list` through any server
// shows every server's. A server that died leaves its report: it carries the
// time it was made, and the list shows reports of live servers only.
import { check, PoolServerStatus, PoolSpec, type PoolStatus } from "@hutch/shared";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { Listeners } from "../../listeners.ts";
import { log } from "../../log.ts";
import { clusterName, defaultReplicas, opening, retrying } from "./cluster.ts";
import { token } from "./kv.ts";
import type { PoolSizes } from "../types.ts";

const logger = log.create({ service: "fleet" });

export const POOLS_BUCKET = "hutch-pools";
const TIMEOUT_MS = 30_000;

const wantKey = (engine: string, image: string) => `want.${token(engine)}.${token(image)}`;

export class FleetPools implements PoolSizes {
  private readonly wanted = new Map<string, PoolSpec>();
  private readonly reports = new Map<string, PoolServerStatus>();
  private readonly changed = new Listeners<[]>("pool sizes");
  private stopWatch?: () => void;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    /** This server's node name. */
    private readonly node: string,
    /** The live servers' names, so a dead server's last report is not shown. */
    private readonly live: () => Promise<Set<string>>,
  ) {}

  /** The bucket, followed, with every entry it held when opened. */
  static async open(nc: NatsConnection, node: string, live: () => Promise<Set<string>>, bucket = POOLS_BUCKET): Promise<FleetPools> {
    const kv = await opening(
      () => clusterName(nc),
      `the opening of KV bucket ${bucket}`,
      TIMEOUT_MS,
      () => new Kvm(nc).create(bucket, { replicas: defaultReplicas(nc), history: 1 }),
    );
    const pools = new FleetPools(nc, kv, node, live);
    await pools.watch();
    return pools;
  }

  list(): PoolSpec[] {
    return [...this.wanted.values()].sort((a, b) => `${a.engine} ${a.image}`.localeCompare(`${b.engine} ${b.image}`));
  }

  async set(spec: PoolSpec): Promise<void> {
    await this.write(`the pool ${spec.engine}/${spec.image}`, () => this.kv.put(wantKey(spec.engine, spec.image), JSON.stringify(spec)));
    // Seen here at once, not only once the watch brings it back.
    this.wanted.set(wantKey(spec.engine, spec.image), spec);
    this.changed.emit();
  }

  async clear(engine: string, image: string): Promise<boolean> {
    const key = wantKey(engine, image);
    const had =
      this.wanted.has(key) || (await this.write(`a read of the pool ${engine}/${image}`, () => this.kv.get(key)))?.operation === "PUT";
    if (!had) return false;
    await this.write(`the removal of the pool ${engine}/${image}`, () => this.kv.delete(key));
    this.wanted.delete(key);
    this.changed.emit();
    return true;
  }

  onChange(fn: () => void): void {
    this.changed.add(fn);
  }

  async elsewhere(): Promise<PoolStatus[]> {
    const live = await this.live();
    return [...this.reports.values()].filter((r) => r.node !== this.node && live.has(r.node)).flatMap((r) => r.pools);
  }

  async report(pools: PoolStatus[]): Promise<void> {
    const status: PoolServerStatus = { node: this.node, at: Date.now(), pools };
    await this.write("this server's pool report", () => this.kv.put(`status.${token(this.node)}`, JSON.stringify(status)));
  }

  async close(): Promise<void> {
    this.stopWatch?.();
    await this.kv
      .delete(`status.${token(this.node)}`)
      .catch((err) => logger.warn("could not remove this server's pool report", { err: String(err) }));
  }

  private write<T>(what: string, attempt: () => Promise<T>): Promise<T> {
    return retrying(() => clusterName(this.nc), what, TIMEOUT_MS, attempt);
  }

  /** Follows the bucket: each key's latest value, then every change. Resolves once the entries held at the start are in. */
  private async watch(): Promise<void> {
    const iter = await this.write("the watch of the pools bucket", () => this.kv.watch());
    this.stopWatch = () => iter.stop();
    let caughtUp!: () => void;
    const ready = new Promise<void>((r) => (caughtUp = r));
    // A JetStream API call like any other here: under load it can time out once.
    const status = await this.write("the size of the pools bucket", () => this.kv.status());
    const last = status.values;
    if (last === 0) caughtUp();
    let seen = 0;
    void (async () => {
      for await (const e of iter) {
        seen++;
        const value = e.operation === "PUT" ? parse(e.string()) : null;
        if (e.key.startsWith("want.")) {
          if (value === null) this.wanted.delete(e.key);
          else if (check(PoolSpec, value)) this.wanted.set(e.key, value);
          else logger.warn("skipped a pool entry that does not check", { key: e.key });
          this.changed.emit();
        } else if (e.key.startsWith("status.")) {
          if (value === null) this.reports.delete(e.key);
          else if (check(PoolServerStatus, value)) this.reports.set(e.key, value);
        }
        if (seen >= last || e.delta === 0) caughtUp();
      }
    })();
    await ready;
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
