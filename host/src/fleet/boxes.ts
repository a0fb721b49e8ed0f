// The fleet's box directory: which node runs each box. A box runs on the
// server that made it (its registry row, its engine, its terminal are that
// server's); that server puts the box as it shows it, with its owner, in the
// KV bucket hutch-boxes whenever the box changes, and deletes the entry when
// the box goes. Every server follows the bucket (a KV watch: each key's
// latest value, then every change) and keeps it in memory, so a server lists
// the whole fleet's boxes and finds where one runs without a round trip.
//
// The directory is what the node that runs a box says; nothing else writes a
// node's entries. A server that stops leaves its entries (its boxes are still
// its own when it comes back); one that starts removes its entries for boxes
// it no longer has.
import { check, type Box, type BoxSpec, FleetBox, type FleetEvent } from "@hutch/shared";
import { type KV, Kvm } from "@nats-io/kv";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { log } from "../log.ts";
import { ApiCodes, clusterName, defaultReplicas, isApiError, manager, opening, retrying } from "../store/jetstream/cluster.ts";

const logger = log.create({ service: "fleet" });

export const BOXES_BUCKET = "hutch-boxes";
const TIMEOUT_MS = 30_000;

/** What the directory needs of this server's boxes. */
export interface LocalBoxes {
  list(): Box[];
  byId(id: string): Box | null;
  owner(id: string): string;
  /** What the box is given (quotas and placement count it). */
  given(id: string): { cpus: number; memoryMiB: number };
  /** Calls fn with a box's id whenever it appears, changes or goes. */
  onChange(fn: (id: string) => void): void;
  /** The placement of this server's copy (1: made here; a move or failover's epoch when it came from another server). */
  epoch(id: string): number;
  /** What another server needs to make the box again. */
  spec(id: string): BoxSpec | null;
  /** Whether the box is being made here now (a move or failover's target): its entry keeps `moving` until it is. */
  adopting?(id: string): boolean;
}

/** A compare-and-set that found the key moved on (JetStream's wrong-last-sequence). */
function lostRace(err: unknown): boolean {
  return isApiError(err, ApiCodes.wrongLastSequence) || /wrong last sequence|key exists/i.test(String(err));
}

/**
 * Whether the directory's entry says this server's copy of a box is no longer
 * the box: it names another node, or a later placement of it. A copy this
 * server is moving away itself (`box move`, `node drain`) is not superseded
 * until the move's target has the box: the mover removes it then.
 */
export function superseded(e: FleetBox | undefined, node: string, localEpoch: number): boolean {
  if (!e) return false;
  if (e.moving && e.moving.from === node && e.moving.reason !== "failover") return false;
  return e.node !== node || (e.epoch ?? 1) > localEpoch;
}

export class BoxDirectory {
  private readonly entries = new Map<string, FleetBox>();
  private seen = 0;
  private readonly waiting: { at: number; done: () => void }[] = [];
  private stopWatch?: () => void;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    private readonly jsm: JetStreamManager,
    /** This server's node name. */
    readonly node: string,
  ) {}

  /** The directory, caught up with the bucket as it was when opened. */
  static async open(nc: NatsConnection, node: string): Promise<BoxDirectory> {
    const kv = await opening(
      () => clusterName(nc),
      `the opening of KV bucket ${BOXES_BUCKET}`,
      TIMEOUT_MS,
      () => new Kvm(nc).create(BOXES_BUCKET, { replicas: defaultReplicas(nc), history: 1 }),
    );
    const d = new BoxDirectory(nc, kv, await manager(nc), node);
    await d.watch();
    await d.fresh();
    return d;
  }

  /** Resolves once the directory has every entry the bucket held when this was called. */
  async fresh(): Promise<void> {
    const last = await retrying(
      () => clusterName(this.nc),
      "a read of the box directory",
      TIMEOUT_MS,
      async () => (await this.jsm.streams.info(`KV_${BOXES_BUCKET}`)).state.last_seq,
    );
    if (last <= this.seen) return;
    await new Promise<void>((done) => this.waiting.push({ at: last, done }));
  }

  /** Every box of the fleet, this server's own included. */
  all(): FleetBox[] {
    return [...this.entries.values()];
  }

  /** Boxes other nodes run. */
  others(): FleetBox[] {
    return [...this.entries.values()].filter((e) => e.node !== this.node);
  }

  /** A box's entry as this server last saw it, whichever node runs it. */
  entry(id: string): FleetBox | undefined {
    return this.entries.get(id);
  }

  /** A box another node runs, by id or name. */
  find(ref: string): FleetBox | undefined {
    const byId = this.entries.get(ref);
    if (byId) return byId.node === this.node ? undefined : byId;
    return this.others().find((e) => e.box.name === ref);
  }

  /**
   * Puts this server's boxes in the directory, removes its entries for boxes
   * it no longer has, and keeps the directory told of every change.
   */
  async serve(local: LocalBoxes, events?: { publish(e: Omit<FleetEvent, "seq">): Promise<void> }): Promise<void> {
    // What the fleet's events last said of each box: a change is told when the box appears, changes state or goes.
    const told = new Map<string, { name: string; state: string }>();
    const tell = (kind: FleetEvent["kind"], box: { id: string; name: string; state: string }) =>
      events?.publish({ at: new Date().toISOString(), kind, node: this.node, box: { id: box.id, name: box.name, state: box.state } });
    for (const box of local.list()) {
      told.set(box.id, { name: box.name, state: box.state });
      await this.put(local, box);
    }
    for (const e of [...this.entries.values()]) if (e.node === this.node && !local.byId(e.box.id)) await this.remove(e.box.id);
    // One write at a time per box, in change order: a box deleted right after a change never comes back.
    const chains = new Map<string, Promise<void>>();
    local.onChange((id) => {
      const next = (chains.get(id) ?? Promise.resolve())
        .then(async () => {
          const box = local.byId(id);
          if (box) await this.put(local, box);
          else await this.remove(id);
          const was = told.get(id);
          if (box && was === undefined) await tell("box.created", box);
          else if (box && was?.state !== box.state) await tell("box.state", box);
          else if (!box && was !== undefined) await tell("box.deleted", { id, name: was.name, state: "deleted" });
          if (box) told.set(id, { name: box.name, state: box.state });
          else told.delete(id);
        })
        .catch((err) => logger.warn("the fleet's box directory was not told of a change", { box: id, err: String(err) }));
      chains.set(id, next);
      void next.then(() => {
        if (chains.get(id) === next) chains.delete(id);
      });
    });
  }

  close(): void {
    this.stopWatch?.();
    for (const w of this.waiting.splice(0)) w.done();
  }

  /** The entry of a box, as the bucket holds it now (not as this server last saw it), with its revision. */
  async read(id: string): Promise<{ entry: FleetBox | undefined; revision: number } | null> {
    const e = await this.kv.get(id);
    if (e?.operation !== "PUT") return null;
    let v: unknown;
    try {
      v = e.json();
    } catch {
      v = null;
    }
    return { entry: check(FleetBox, v) ? v : undefined, revision: e.revision };
  }

  /**
   * Writes an entry only if the bucket still holds what was read (revision;
   * 0: no entry), so a decision made on a stale read is not written over a
   * newer one. False when it did not hold.
   */
  async swap(entry: FleetBox, revision: number): Promise<boolean> {
    try {
      if (revision === 0) await this.kv.create(entry.box.id, JSON.stringify(entry));
      else await this.kv.update(entry.box.id, JSON.stringify(entry), revision);
      return true;
    } catch (err) {
      if (lostRace(err)) return false;
      throw err;
    }
  }

  /**
   * Puts this server's copy of a box, unless the entry says it is superseded
   * (another node runs the box now, or a later placement of it): a server
   * never writes over the fleet's decision about where a box runs.
   */
  private async put(local: LocalBoxes, box: Box): Promise<void> {
    const epoch = local.epoch(box.id);
    const spec = local.spec(box.id);
    const entry: FleetBox = {
      node: this.node,
      owner: local.owner(box.id),
      ...local.given(box.id),
      box: { ...box, server: this.node },
      epoch,
      ...(spec ? { spec } : {}),
    };
    await retrying(
      () => clusterName(this.nc),
      `the directory entry of box ${box.name}`,
      TIMEOUT_MS,
      async () => {
        for (;;) {
          const cur = await this.read(box.id);
          if (cur?.entry && (cur.entry.node !== this.node || (cur.entry.epoch ?? 1) > epoch)) return;
          // Until it is made and filled, the box is still on its way here: a server that dies meanwhile leaves it to the leader.
          const keep = cur?.entry?.moving && local.adopting?.(box.id) ? { moving: cur.entry.moving } : {};
          if (await this.swap({ ...entry, ...keep }, cur?.revision ?? 0)) return;
        }
      },
    );
  }

  /** Removes a box's entry if it is still this server's: a box that went elsewhere keeps the entry its new server wrote. */
  private async remove(id: string): Promise<void> {
    const cur = await this.read(id);
    if (!cur || (cur.entry && cur.entry.node !== this.node)) return;
    try {
      await this.kv.delete(id, { previousSeq: cur.revision });
    } catch (err) {
      if (!lostRace(err)) throw err;
    }
  }

  /** Follows the bucket: each key's latest value, then every change; an entry that does not check is skipped. */
  private async watch(): Promise<void> {
    const iter = await retrying(
      () => clusterName(this.nc),
      "the watch of the box directory",
      TIMEOUT_MS,
      () => this.kv.watch(),
    );
    this.stopWatch = () => iter.stop();
    void (async () => {
      for await (const e of iter) {
        if (e.operation === "PUT") {
          let value: unknown;
          try {
            value = e.json();
          } catch {
            value = null;
          }
          if (check(FleetBox, value) && value.box.id === e.key) this.entries.set(e.key, value);
          else logger.warn("skipped a box directory entry that does not check", { key: e.key });
        } else this.entries.delete(e.key);
        this.seen = Math.max(this.seen, e.revision);
        for (let i = this.waiting.length - 1; i >= 0; i--) {
          const w = this.waiting[i]!;
          if (w.at <= this.seen) {
            this.waiting.splice(i, 1);
            w.done();
          }
        }
      }
    })();
  }
}
