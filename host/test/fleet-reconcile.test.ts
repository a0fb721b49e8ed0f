// The fleet's reconcile loop on a real JetStream (one NATS node): the lease
// (fleet/lease.ts) has one holder at a time and passes on, with the next
// epoch, when its holder gives it up; the leader gives a restart-always box
// whose node is not live to a live one from its latest checkpoint, under the
// next epoch, and leaves a never-restart box where it is; a server's copy is
// superseded by a later placement (fleet/boxes.ts), not by its own move;
// a move is not undone by the server's own write of the box meanwhile.
// tests/e2e/fleet-failover.test.ts checks the same through real servers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Box, FleetBox, FleetEvent } from "@hutch/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { BoxDirectory, superseded } from "../src/fleet/boxes.ts";
import { Cordons, fleetBucket, Lease } from "../src/fleet/lease.ts";
import { Mover } from "../src/fleet/move.ts";
import { Reconciler } from "../src/fleet/reconcile.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";
import { fleetNode } from "./fleet-fixtures.ts";

let nats: NatsCluster;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNatsCluster(1);
  nc = await connect({ servers: nats.urls });
}, 60_000);

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

const entry = (id: string, on: string, extra: Partial<FleetBox> = {}, box: Partial<Box> = {}): FleetBox => ({
  node: on,
  owner: "alice",
  cpus: 1,
  memoryMiB: 512,
  box: {
    id,
    name: id,
    engine: "process",
    isolation: "namespace",
    state: "running",
    desired: "running",
    createdAt: "2026-12-05T00:00:00Z",
    updatedAt: "2026-12-05T00:00:00Z",
    ...box,
  },
  epoch: 1,
  spec: { engine: "process", config: {}, allow: [], bindings: [] },
  ...extra,
});

describe("superseded", () => {
  test("another node or a later epoch supersedes a copy; a move this server started does not, until its target has the box", () => {
    expect(superseded(undefined, "a", 1)).toBe(false);
    expect(superseded(entry("x", "a"), "a", 1)).toBe(false);
    expect(superseded(entry("x", "b"), "a", 1)).toBe(true);
    expect(superseded(entry("x", "a", { epoch: 3 }), "a", 2)).toBe(true);
    expect(superseded(entry("x", "b", { epoch: 2, moving: { from: "a", reason: "move" } }), "a", 1)).toBe(false);
    expect(superseded(entry("x", "b", { epoch: 2, moving: { from: "a", reason: "failover" } }), "a", 1)).toBe(true);
  });
});

describe("the lease", () => {
  test("one holder at a time; given up, the next server takes it under the next epoch", async () => {
    const kv = await fleetBucket(nc);
    const one = new Lease(kv, "one");
    const two = new Lease(kv, "two");
    await one.round();
    await two.round();
    expect(one.epoch()).not.toBeNull();
    expect(two.epoch()).toBeNull();
    expect(await two.holder()).toBe("one");
    const first = one.epoch()!;
    await one.round();
    expect(one.epoch()).toBe(first);
    await one.stop();
    expect(one.epoch()).toBeNull();
    await two.round();
    expect(two.epoch()).toBe(first + 1);
    expect(await one.holder()).toBe("two");
    await two.stop();
  });
});

describe("the leader's round", () => {
  test("a restart-always box of a dead node goes to a live, uncordoned one from its checkpoint under the next epoch; a never-restart box stays", async () => {
    const dir = await BoxDirectory.open(nc, "live1");
    const kv = await fleetBucket(nc);
    const lease = new Lease(kv, "live1");
    await lease.round();
    const cordons = new Cordons(kv, await jetstreamManager(nc));
    await cordons.set("live2", true);
    const told: Omit<FleetEvent, "seq">[] = [];
    const last = { snapshot: "snap_aaaaaaaaaaaaaaaaaaaa", at: "2026-12-05T00:00:00Z" };
    expect(await dir.swap(entry("box_keep", "gone", {}, { restart: "always", checkpoint: { everyS: 60, last } }), 0)).toBe(true);
    expect(await dir.swap(entry("box_lose", "gone"), 0)).toBe(true);
    await dir.fresh();
    const r = new Reconciler({
      node: "live1",
      directory: dir,
      lease,
      cordons,
      nodes: async () => [fleetNode("live1"), fleetNode("live2")],
      events: { publish: async (e) => void told.push(e) },
      here: { epochOf: () => null, ids: () => [], adopt: async () => {}, discard: async () => {}, touch: () => {} },
    });
    await r.round();
    await dir.fresh();
    const kept = dir.entry("box_keep")!;
    expect(kept.node).toBe("live1");
    expect(kept.epoch).toBe(2);
    expect(kept.moving).toEqual({ from: "gone", reason: "failover", snapshot: last.snapshot });
    expect(dir.entry("box_lose")!.node).toBe("gone");
    expect(told.map((e) => e.kind)).toEqual(["box.moved"]);
    // A second round decides nothing more: the box has its node.
    await r.round();
    await dir.fresh();
    expect(dir.entry("box_keep")!.epoch).toBe(2);
    await cordons.set("live2", false);
    await lease.stop();
    dir.close();
  });
});

describe("a move", () => {
  test("this server's own write of the box between the move's read and its swap is not a conflict: the move reads again and goes on", async () => {
    const dir = await BoxDirectory.open(nc, "mv1");
    const kv = await fleetBucket(nc);
    const snapshot = "snap_bbbbbbbbbbbbbbbbbbbb";
    expect(await dir.swap(entry("box_mv", "mv1"), 0)).toBe(true);
    await dir.fresh();
    // The server's put of the box's row (its checkpoint after the snapshot) lands just after the move read the entry.
    let raced = 0;
    const racing = Object.create(dir) as BoxDirectory;
    racing.read = async (id: string) => {
      const cur = await dir.read(id);
      if (raced++ === 0 && cur?.entry) {
        const last = { snapshot, at: "2026-12-05T00:00:01Z" };
        expect(await dir.swap({ ...cur.entry, box: { ...cur.entry.box, checkpoint: { everyS: 60, last } } }, cur.revision)).toBe(true);
      }
      return cur;
    };
    const mover = new Mover({
      node: "mv1",
      directory: racing,
      cordons: new Cordons(kv, await jetstreamManager(nc)),
      nodes: async () => [fleetNode("mv1"), fleetNode("mv2")],
      events: { publish: async () => {} },
      here: {
        find: (ref) => (ref === "box_mv" ? { id: "box_mv", name: "box_mv", engine: "process", memoryMiB: 512 } : undefined),
        epochOf: () => 1,
        spec: () => null,
        snapshot: async () => snapshot,
        setEpoch: () => {},
        discard: async () => {},
      },
    });
    // The target makes the box once the entry names it: the moving mark goes, the box runs.
    const target = (async () => {
      for (;;) {
        const cur = await dir.read("box_mv");
        const e = cur?.entry;
        if (cur && e?.node === "mv2" && e.moving) {
          const { moving: _, ...made } = e;
          if (await dir.swap({ ...made, box: { ...e.box, state: "running" } }, cur.revision)) return;
        }
        await Bun.sleep(50);
      }
    })();
    const r = await mover.move("box_mv", { to: "mv2", reason: "move" }, () => {}, new AbortController().signal);
    await target;
    expect(raced).toBeGreaterThan(1);
    expect(r).toMatchObject({ from: "mv1", to: "mv2", epoch: 2, snapshot });
    const e = (await dir.read("box_mv"))!.entry!;
    expect(e.node).toBe("mv2");
    expect(e.box.checkpoint?.last?.snapshot).toBe(snapshot);
    dir.close();
  });
});
