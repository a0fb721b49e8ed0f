// The fleet's reconcile loop, level-triggered: every TICK_MS each server
// compares the box directory (fleet/boxes.ts) with what it runs, and the
// lease holder (fleet/lease.ts) compares it with the live nodes.
//
// Every server:
// - a box it runs whose entry names another node, or a later placement
//   (epoch), has been superseded: its copy is removed without a word to the
//   box's sessions (`here.discard`), so a server that comes back after its
//   boxes were made again elsewhere leaves one copy of each and writes
//   nothing for them;
// - an entry that names it and carries `moving` is a box it is to make:
//   `here.adopt` makes it under its id and name, fills it from the snapshot
//   named, and logs box.moved in its sessions.
//
// The leader only: a box with `restart: always` whose node is not live (its
// heartbeat lapsed, fleet/nodes.ts) is given to the live, uncordoned server
// placement picks (fleet/place.ts), from its latest checkpoint, under the
// next epoch; so is a box whose move or failover went to a node that died
// before it made the box. Each decision is a compare-and-set on the entry it
// read, so a stale leader's decision does not land.
import { type FleetBox, type FleetEvent, type FleetNode, HutchError } from "@hutch/shared";
import { log } from "../log.ts";
import { type BoxDirectory, superseded } from "./boxes.ts";
import type { Cordons, Lease } from "./lease.ts";
import { place } from "./place.ts";

const logger = log.create({ service: "fleet" });

const TICK_MS = 1_000;
/** How long after a failed adoption it is tried again. */
const RETRY_MS = 15_000;

/** What the reconcile loop needs of this server. */
export interface Here {
  /** This server's epoch of a box it runs, or null when it does not run it. */
  epochOf(id: string): number | null;
  /** The ids of the boxes it runs. */
  ids(): string[];
  /** Makes the box the entry describes here, fills it and tells its sessions. */
  adopt(entry: FleetBox): Promise<void>;
  /** Removes this server's superseded copy without a word to its sessions. */
  discard(id: string): Promise<void>;
  /** Tells the directory the box changed (once it is made, its entry loses `moving`). */
  touch(id: string): void;
}

export interface ReconcileDeps {
  node: string;
  directory: BoxDirectory;
  lease: Lease;
  cordons: Cordons;
  nodes(): Promise<FleetNode[]>;
  events: { publish(e: Omit<FleetEvent, "seq">): Promise<void> };
  here: Here;
}

export class Reconciler {
  private timer: ReturnType<typeof setInterval> | undefined;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Boxes being made or removed here, so a round does not start them twice. */
  private readonly busy = new Map<string, Promise<void>>();
  private readonly failedAt = new Map<string, number>();

  constructor(private readonly d: ReconcileDeps) {}

  start(): void {
    this.timer = setInterval(() => {
      if (!this.running && !this.stopped) this.running = this.round().finally(() => (this.running = null));
    }, TICK_MS);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** Resolves once a box this server is making (a move or failover's target) is made, or at once when it is not making it. */
  adopting(id: string): Promise<void> | undefined {
    return this.busy.get(id);
  }

  /**
   * At the daemon's start, before its boxes are looked at: the copies the
   * fleet has placed elsewhere since are removed, before anything could
   * start them or speak for them.
   */
  async fence(): Promise<number> {
    let n = 0;
    for (const id of this.d.here.ids()) {
      const e = this.d.directory.entry(id);
      if (superseded(e, this.d.node, this.d.here.epochOf(id) ?? 1)) {
        logger.info("this server's copy of a box was superseded while it was away; removing it", {
          box: e?.box.name ?? id,
          now: e?.node,
          epoch: e?.epoch,
        });
        await this.d.here.discard(id);
        n++;
      }
    }
    return n;
  }

  async round(): Promise<void> {
    try {
      this.mine();
      if (this.d.lease.epoch() !== null) await this.lead();
    } catch (err) {
      logger.warn("a reconcile round failed; the next one tries again", { err: String(err) });
    }
  }

  /** What every server does: make what the directory gives it, remove what it no longer runs. */
  private mine(): void {
    const now = Date.now();
    for (const e of this.d.directory.all()) {
      const id = e.box.id;
      if (this.busy.has(id)) continue;
      const epoch = this.d.here.epochOf(id);
      if (epoch !== null && superseded(e, this.d.node, epoch)) {
        this.track(id, this.d.here.discard(id), "removing a superseded copy");
      } else if (e.node === this.d.node && e.moving && (epoch === null || epoch < (e.epoch ?? 1))) {
        if (now - (this.failedAt.get(id) ?? 0) < RETRY_MS) continue;
        this.track(
          id,
          this.d.here.adopt(e).then(
            // Once it is no longer busy here: the directory then writes it without `moving`.
            () => void setTimeout(() => this.d.here.touch(id), 0),
            async (err) => {
              // Nothing half-made is kept: the next try, RETRY_MS on, starts clean.
              this.failedAt.set(id, Date.now());
              await this.d.here.discard(id).catch(() => undefined);
              throw err;
            },
          ),
          `making box "${e.box.name}" here (${e.moving.reason} from ${e.moving.from})`,
        );
      }
    }
  }

  private track(id: string, p: Promise<void>, what: string): void {
    const done = p.catch((err) => logger.warn(`${what} failed`, { box: id, err: String(err) })).finally(() => this.busy.delete(id));
    this.busy.set(id, done);
  }

  /** The leader's round: boxes whose node is gone go to a live one. */
  private async lead(): Promise<void> {
    const live = await this.d.nodes();
    const names = new Set(live.map((n) => n.name));
    const entries = this.d.directory.all();
    const orphans = entries.filter(
      (e) =>
        !names.has(e.node) &&
        // A move whose source still runs is its source's to finish or take back.
        !(e.moving && e.moving.reason !== "failover" && names.has(e.moving.from)) &&
        (e.box.restart === "always" || e.moving?.reason === "failover"),
    );
    if (orphans.length === 0) return;
    const cordoned = new Set(await this.d.cordons.list());
    const open = live.filter((n) => !cordoned.has(n.name));
    for (const e of orphans) {
      if (this.d.lease.epoch() === null) return;
      const cur = await this.d.directory.read(e.box.id);
      if (!cur?.entry || names.has(cur.entry.node)) continue;
      const was = cur.entry;
      let target: string;
      try {
        target = place(open, this.d.directory.all(), {
          engine: was.spec?.engine ?? was.box.engine,
          memoryMiB: was.memoryMiB,
        });
      } catch (err) {
        if (!this.failedAt.has(`place:${was.box.id}`))
          logger.warn("a box whose server is gone has nowhere to go yet", {
            box: was.box.name,
            err: err instanceof HutchError ? err.message : String(err),
          });
        this.failedAt.set(`place:${was.box.id}`, Date.now());
        continue;
      }
      this.failedAt.delete(`place:${was.box.id}`);
      const from = was.moving?.from ?? was.node;
      const snapshot = was.moving?.snapshot ?? was.box.checkpoint?.last?.snapshot;
      const epoch = (was.epoch ?? 1) + 1;
      const next: FleetBox = {
        ...was,
        node: target,
        epoch,
        box: { ...was.box, state: "creating", server: target },
        moving: { from, reason: "failover", ...(snapshot ? { snapshot } : {}) },
      };
      if (!(await this.d.directory.swap(next, cur.revision))) continue;
      logger.info("a box whose server is gone goes to another", { box: was.box.name, from: was.node, to: target, epoch, snapshot });
      await this.d.events.publish({
        at: new Date().toISOString(),
        kind: "box.moved",
        node: target,
        box: { id: was.box.id, name: was.box.name, state: "creating" },
        detail: `failover from ${was.node} (not live) to ${target}, epoch ${epoch}${snapshot ? `, from checkpoint ${snapshot}` : ", no checkpoint: made afresh"}`,
      });
    }
  }
}
