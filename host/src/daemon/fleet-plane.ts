// The fleet plane on this server (issue 30): the reconcile loop (failover,
// adoption, removal of superseded copies: fleet/reconcile.ts), box moves
// (fleet/move.ts), and their routes: `hutch box move`, `hutch node
// list|cordon|uncordon|drain`. Loaded only in a fleet.
import { Elysia, t } from "elysia";
import {
  type Actor,
  BoxMoveBody,
  type BoxSpec,
  type CarriedBox,
  emit,
  Events,
  type FleetBox,
  type FleetNodeRow,
  HutchError,
  type NodeDrainResult,
  type OpReport,
} from "@hutch/shared";
import type { BoxService } from "../box/service.ts";
import type { SessionService } from "../session/service.ts";
import type { SnapshotService } from "../snapshot/service.ts";
import type { Fleet } from "../fleet/index.ts";
import { Mover } from "../fleet/move.ts";
import { Reconciler } from "../fleet/reconcile.ts";
import { log } from "../log.ts";
import { opResponse, type RunningOps } from "./ops.ts";
import { actorFrom, type Identify } from "./actor.ts";

const logger = log.create({ service: "fleet" });

export interface FleetPlane {
  reconciler: Reconciler;
  mover: Mover;
  /** Resolves when a request for this box may go on: a move away from here finished, or its making here did. */
  settled(ref: string): Promise<void> | undefined;
  controller(ops: RunningOps, identify: Identify): Elysia;
  stop(): Promise<void>;
}

export function fleetPlane(deps: {
  fleet: Fleet;
  boxes: BoxService;
  sessions: SessionService;
  snapshots: SnapshotService;
  /** What another server needs to make a box again (BoxService.spec with the broker's policy). */
  spec(id: string): BoxSpec | null;
  /** VM boxes: their sleeping state carried through the fleet's store (fleet/carry.ts), wired by the daemon. */
  carry?: {
    out(id: string, report: OpReport, signal: AbortSignal): Promise<CarriedBox>;
    in(ref: CarriedBox, epoch: number): Promise<void>;
    drop(ref: CarriedBox): Promise<void>;
  };
}): FleetPlane {
  const { fleet, boxes, sessions, snapshots, carry } = deps;
  const snapshot = async (id: string, report: OpReport, signal: AbortSignal) =>
    (await snapshots.create(id, "move", report, signal)).snapshot.id;
  const reconciler = new Reconciler({
    node: fleet.node,
    directory: fleet.directory,
    lease: fleet.lease,
    cordons: fleet.cordons,
    nodes: () => fleet.nodes(),
    events: fleet.events,
    here: {
      epochOf: (id) => (boxes.byId(id) ? boxes.epoch(id) : null),
      ids: () => boxes.list().map((b) => b.id),
      discard: (id) => boxes.discard(id),
      adopt: (e) => adopt(e),
      touch: (id) => boxes.changes.emit(id),
    },
  });
  /** Makes a box the fleet gave this server: under its own id and name, filled from its snapshot; its sessions told. */
  const adopt = async (e: FleetBox): Promise<void> => {
    if (!e.spec || !e.moving) throw new HutchError("invalid", `box "${e.box.name}"'s directory entry does not say how to make it`);
    const t0 = Date.now();
    const epoch = e.epoch ?? 1;
    const owner = e.owner === "" ? undefined : e.owner;
    const carried = e.moving.carried;
    if (carried) {
      if (!carry) throw new HutchError("invalid", `box "${e.box.name}" comes as a VM's carried state, which this server cannot take`);
      await carry.in(carried, epoch);
    } else await boxes.adopt({ id: e.box.id, name: e.box.name, owner, spec: e.spec, epoch });
    if (e.moving.snapshot) await snapshots.seed(e.box.id, e.moving.snapshot);
    // The new copy's latest checkpoint is the snapshot it came from, until it takes its own.
    if (e.moving.snapshot) boxes.checkpointed(e.box.id, e.moving.snapshot, new Date().toISOString());
    sessions.boxEvent(
      e.box.id,
      emit(Events.boxMoved, {
        box: e.box.id,
        from: e.moving.from,
        to: fleet.node,
        reason: e.moving.reason,
        ...(e.moving.snapshot ? { snapshot: e.moving.snapshot } : {}),
        programsKept: carried !== undefined,
        epoch,
        ...(e.moving.by ? { by: e.moving.by } : {}),
      }),
    );
    logger.info("box made here", { box: e.box.name, from: e.moving.from, reason: e.moving.reason, epoch, ms: Date.now() - t0 });
  };
  const mover = new Mover({
    node: fleet.node,
    directory: fleet.directory,
    cordons: fleet.cordons,
    nodes: () => fleet.nodes(),
    events: fleet.events,
    here: {
      find: (ref) => {
        const b = boxes.find(ref);
        if (!b) return undefined;
        return { id: b.id, name: b.name, engine: b.engine, memoryMiB: boxes.given(b.id).memoryMiB };
      },
      epochOf: (id) => (boxes.byId(id) ? boxes.epoch(id) : null),
      snapshot,
      spec: deps.spec,
      setEpoch: (id, n) => boxes.setEpoch(id, n),
      discard: (id) => boxes.discard(id),
      ...(carry ? { carry } : {}),
    },
  });

  const rows = async (): Promise<FleetNodeRow[]> => {
    await fleet.directory.fresh();
    const cordoned = new Set(await fleet.cordons.list());
    const leader = await fleet.lease.holder();
    const all = fleet.directory.all();
    return (await fleet.nodes()).map((node) => ({
      node,
      cordoned: cordoned.has(node.name),
      boxes: all.filter((b) => b.node === node.name).length,
      leader: leader === node.name,
    }));
  };

  /** Cordons or uncordons a server, tells the fleet, and returns its row as `node list` shows it. */
  const cordon = async (name: string, on: boolean): Promise<FleetNodeRow | null> => {
    await fleet.cordons.set(name, on);
    await fleet.events.publish({ at: new Date().toISOString(), kind: on ? "node.cordoned" : "node.uncordoned", node: name });
    return (await rows()).find((r) => r.node.name === name) ?? null;
  };

  const drain = async (report: OpReport, signal: AbortSignal, by: Actor | undefined): Promise<NodeDrainResult> => {
    await fleet.cordons.set(fleet.node, true);
    await fleet.events.publish({ at: new Date().toISOString(), kind: "node.cordoned", node: fleet.node, detail: "drain" });
    const out: NodeDrainResult = { node: fleet.node, moved: [], failed: [] };
    const list = boxes.list();
    report({ type: "step", n: 1, total: 1, title: `moving ${list.length} box${list.length === 1 ? "" : "es"} off ${fleet.node}` });
    for (const b of list) {
      if (signal.aborted) break;
      try {
        out.moved.push(await mover.move(b.id, { reason: "drain", ...(by ? { by } : {}) }, report, signal));
      } catch (err) {
        out.failed.push({ box: b.name, error: err instanceof Error ? err.message : String(err) });
        report({ type: "note", text: `box ${b.name} stays on ${fleet.node}: ${err instanceof Error ? err.message : String(err)}` });
      }
    }
    report({ type: "done", summary: `${out.moved.length} moved off ${fleet.node}, ${out.failed.length} not` });
    return out;
  };

  return {
    reconciler,
    mover,
    settled(ref) {
      const away = mover.during(ref);
      if (away) return away.then(() => undefined);
      const e = fleet.directory.entry(ref) ?? fleet.directory.all().find((x) => x.box.name === ref);
      if (e && e.node === fleet.node && e.moving && !boxes.byId(e.box.id)) {
        // Made here any moment now (the reconcile loop): wait for it, a bounded while.
        return waitFor(() => boxes.byId(e.box.id) !== null && reconciler.adopting(e.box.id) === undefined, 60_000);
      }
      const making = e ? reconciler.adopting(e.box.id) : undefined;
      return making;
    },
    controller(ops, identify) {
      return new Elysia({ prefix: "/v1/fleet", tags: ["fleet"], normalize: false })
        .get("/nodes", () => rows(), {
          detail: { summary: "The fleet's live servers, cordons, box counts and the reconcile loop's leader (admin)" },
        })
        .post("/nodes/:name/cordon", ({ params }) => cordon(params.name, true), {
          params: t.Object({ name: t.String() }),
          detail: { summary: "Cordon a server: it takes no new boxes (admin)" },
        })
        .post("/nodes/:name/uncordon", ({ params }) => cordon(params.name, false), {
          params: t.Object({ name: t.String() }),
          detail: { summary: "Uncordon a server (admin)" },
        })
        .post(
          "/nodes/:name/drain",
          ({ params, request }) => {
            if (params.name !== fleet.node)
              throw new HutchError("not_found", `server ${params.name} is not live in the fleet`, "list them: hutch node list");
            return opResponse(`drain ${params.name}`, request, ops, (report, signal) =>
              drain(report, signal, actorFrom(request, identify)),
            );
          },
          {
            params: t.Object({ name: t.String() }),
            detail: { summary: "Cordon a server and move every box off it (admin; NDJSON progress)" },
          },
        )
        .post(
          "/boxes/:ref/move",
          ({ params, body, request }) =>
            opResponse(`move ${params.ref}`, request, ops, (report, signal) =>
              mover.move(
                params.ref,
                { ...(body.to !== undefined ? { to: body.to } : {}), reason: "move", by: actorFrom(request, identify) },
                report,
                signal,
              ),
            ),
          {
            params: t.Object({ ref: t.String() }),
            body: BoxMoveBody,
            detail: { summary: "Move a box this server runs to another server of the fleet (admin; NDJSON progress)" },
          },
        ) as unknown as Elysia;
    },
    async stop() {
      await reconciler.stop();
    },
  };
}

async function waitFor(ok: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!ok() && Date.now() < until) await Bun.sleep(100);
}
