// Moving a box this server runs to another server of the fleet (`hutch box
// move`, `hutch node drain`). The source takes a snapshot of the box (the
// fleet's store holds it), then writes the box's directory entry over to the
// target under the next epoch with `moving` set (a compare-and-set on the
// entry it read); the target's reconcile loop makes the box under its id and
// name, fills it from the snapshot and logs box.moved in its sessions; once
// the target's entry shows it running, the source removes its own copy. A
// target that has not made the box within MOVE_TIMEOUT_MS is given up: the
// entry comes back to the source under a later epoch and the box stays here.
import {
  type BoxMoveResult,
  type BoxSpec,
  type CarriedBox,
  type FleetBox,
  type FleetEvent,
  type FleetNode,
  HutchError,
  type Actor,
  type OpReport,
} from "@hutch/shared";
import { log } from "../log.ts";
import type { BoxDirectory } from "./boxes.ts";
import type { Cordons } from "./lease.ts";
import { place } from "./place.ts";

const logger = log.create({ service: "fleet" });

/** How long the target has to make the box and report it running. */
export const MOVE_TIMEOUT_MS = 180_000;
/** How often a move reads and swaps its box's entry while this server's own writes of the box keep changing it. */
const SWAP_ATTEMPTS = 5;

export interface MoveDeps {
  node: string;
  directory: BoxDirectory;
  cordons: Cordons;
  nodes(): Promise<FleetNode[]>;
  events: { publish(e: Omit<FleetEvent, "seq">): Promise<void> };
  here: {
    /** A box this server runs, by name or id: its id and name, engine and the memory placement counts. */
    find(ref: string): { id: string; name: string; engine: string; memoryMiB: number } | undefined;
    epochOf(id: string): number | null;
    /** What another server needs to make the box again, as it is now (its settings and policy). */
    spec(id: string): BoxSpec | null;
    /** A snapshot of the box's files in the fleet's store; its id. */
    snapshot(id: string, report: OpReport, signal: AbortSignal): Promise<string>;
    setEpoch(id: string, epoch: number): void;
    discard(id: string): Promise<void>;
    /** A VM box: put to sleep, and its sleeping state written to the fleet's store (./carry.ts); and that state dropped once the target woke it. */
    carry?: {
      out(id: string, report: OpReport, signal: AbortSignal): Promise<CarriedBox>;
      drop(ref: CarriedBox): Promise<void>;
    };
  };
}

export class Mover {
  /** Boxes being moved away from here: requests for them wait for the move (daemon/fleet-route.ts). */
  private readonly moving = new Map<string, Promise<unknown>>();

  constructor(private readonly d: MoveDeps) {}

  /** The move of a box under way, by id or name, if any. */
  during(ref: string): Promise<unknown> | undefined {
    const box = this.d.here.find(ref);
    return box ? this.moving.get(box.id) : undefined;
  }

  /** The server a box would go to: `to` when it can take it, or the one placement picks among the others. */
  async target(box: { name: string; engine: string; memoryMiB: number }, to: string | undefined): Promise<string> {
    const live = await this.d.nodes();
    const cordoned = new Set(await this.d.cordons.list());
    if (to === this.d.node)
      throw new HutchError("invalid", `box "${box.name}" already runs on ${to}`, "name another server: hutch node list");
    if (to !== undefined && cordoned.has(to))
      throw new HutchError("conflict", `server ${to} is cordoned: it takes no boxes`, `uncordon it first: hutch node uncordon ${to}`);
    const open = live.filter((n) => n.name !== this.d.node && !cordoned.has(n.name));
    return place(open, this.d.directory.all(), { engine: box.engine, memoryMiB: box.memoryMiB, ...(to !== undefined ? { node: to } : {}) });
  }

  async move(
    ref: string,
    opts: { to?: string; reason: "move" | "drain"; by?: Actor },
    report: OpReport,
    signal: AbortSignal,
  ): Promise<BoxMoveResult> {
    const box = this.d.here.find(ref);
    if (!box) throw new HutchError("not_found", `no box named "${ref}" on this server`, "list boxes: hutch box list");
    if (this.moving.has(box.id))
      throw new HutchError("conflict", `box "${box.name}" is being moved already`, `see: hutch box info ${box.name}`);
    const work = this.run(box, opts, report, signal);
    this.moving.set(
      box.id,
      work.catch(() => undefined),
    );
    try {
      return await work;
    } finally {
      this.moving.delete(box.id);
    }
  }

  private async run(
    box: { id: string; name: string; engine: string; memoryMiB: number },
    opts: { to?: string; reason: "move" | "drain"; by?: Actor },
    report: OpReport,
    signal: AbortSignal,
  ): Promise<BoxMoveResult> {
    const t0 = Date.now();
    const to = await this.target(box, opts.to);
    const epoch = this.d.here.epochOf(box.id) ?? 1;
    // A VM keeps its programs: its sleeping state goes; any other box's files go as a snapshot.
    const carry = box.engine === "qemu" ? this.d.here.carry : undefined;
    let snapshot: string | undefined;
    let carried: CarriedBox | undefined;
    if (carry) {
      report({ type: "step", n: 1, total: 3, title: `putting ${box.name} to sleep and carrying its state into the fleet's store` });
      carried = await carry.out(box.id, report, signal);
    } else {
      report({ type: "step", n: 1, total: 3, title: `taking a snapshot of ${box.name} into the fleet's store` });
      snapshot = await this.d.here.snapshot(box.id, report, signal);
    }
    // This server's own writes of the box (its row after the snapshot, a state change) may land between
    // the read and the swap: those are not a decision about where it runs, so read again and retry.
    for (let attempt = 1; ; attempt++) {
      const cur = await this.d.directory.read(box.id);
      const was = cur?.entry;
      if (!cur || !was || was.node !== this.d.node || (was.epoch ?? 1) !== epoch)
        throw new HutchError(
          "conflict",
          `the fleet's directory does not show box "${box.name}" as this server's (epoch ${epoch})`,
          "wait a moment for the directory to catch up, then move it again",
        );
      // The box as it is now: a policy changed a moment ago may not be in the directory's entry yet.
      const spec = this.d.here.spec(box.id);
      const next: FleetBox = {
        ...was,
        ...(spec ? { spec } : {}),
        node: to,
        epoch: epoch + 1,
        box: { ...was.box, state: "creating", server: to },
        moving: {
          from: this.d.node,
          reason: opts.reason,
          ...(snapshot ? { snapshot } : {}),
          ...(carried ? { carried } : {}),
          ...(opts.by ? { by: opts.by } : {}),
        },
      };
      if (await this.d.directory.swap(next, cur.revision)) break;
      if (attempt >= SWAP_ATTEMPTS)
        throw new HutchError("conflict", `box "${box.name}"'s directory entry changed while it was being moved`, "move it again");
    }
    logger.info("moving a box", { box: box.name, to, epoch: epoch + 1, snapshot });
    report({
      type: "step",
      n: 2,
      total: 3,
      title: carried ? `${to} wakes ${box.name} from its carried state` : `${to} makes ${box.name} from snapshot ${snapshot}`,
    });
    const made = await this.untilMade(box.id, to, epoch + 1, signal);
    if (!made) {
      await this.takeBack(box, to, epoch + 2);
      throw new HutchError(
        "failed",
        `server ${to} did not make box "${box.name}" within ${MOVE_TIMEOUT_MS / 1000} s; it stays on ${this.d.node}`,
        `see ${to}'s log, or move it elsewhere: hutch box move ${box.name} --to NODE`,
      );
    }
    report({ type: "step", n: 3, total: 3, title: `removing ${box.name} from ${this.d.node}` });
    await this.d.here.discard(box.id);
    if (carried)
      await carry!.drop(carried).catch((err) => logger.warn("a carried state was not dropped; prune removes it", { err: String(err) }));
    await this.d.events.publish({
      at: new Date().toISOString(),
      kind: "box.moved",
      node: to,
      box: { id: box.id, name: box.name, state: "running" },
      detail: `${opts.reason} from ${this.d.node} to ${to}, epoch ${epoch + 1}, ${carried ? "programs kept" : `snapshot ${snapshot}`}`,
    });
    const ms = Date.now() - t0;
    report({ type: "done", summary: `${box.name} runs on ${to} now (${(ms / 1000).toFixed(1)} s)` });
    return {
      box: box.name,
      id: box.id,
      from: this.d.node,
      to,
      epoch: epoch + 1,
      ...(snapshot ? { snapshot } : {}),
      programsKept: carried !== undefined,
      ms,
    };
  }

  /** Waits for the target's entry: the box made there (no `moving`), running. False on timeout. */
  private async untilMade(id: string, to: string, epoch: number, signal: AbortSignal): Promise<boolean> {
    const until = Date.now() + MOVE_TIMEOUT_MS;
    while (Date.now() < until && !signal.aborted) {
      const e = this.d.directory.entry(id);
      if (e && e.node === to && (e.epoch ?? 1) >= epoch && !e.moving && e.box.state === "running") return true;
      // A later placement than this move's: someone else decided since (the leader, another move).
      if (e && (e.epoch ?? 1) > epoch) return e.node !== this.d.node;
      await Bun.sleep(200);
    }
    return false;
  }

  /** A move the target did not finish: the entry back to this server under a later epoch, this copy its box again. */
  private async takeBack(box: { id: string; name: string }, to: string, epoch: number): Promise<void> {
    for (let i = 0; i < 5; i++) {
      const cur = await this.d.directory.read(box.id);
      const e = cur?.entry;
      if (!cur || !e || e.node !== to || !e.moving) return;
      this.d.here.setEpoch(box.id, epoch);
      const { moving: _, ...rest } = e;
      if (await this.d.directory.swap({ ...rest, node: this.d.node, epoch, box: { ...e.box, server: this.d.node } }, cur.revision)) {
        logger.warn("a move was given up: the box stays here", { box: box.name, to, epoch });
        return;
      }
    }
  }
}
