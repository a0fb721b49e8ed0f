// The fleet's listings read what its buckets' leaders hold, on a real 3-node
// cluster with each client on its own node: a cordon set, or a server
// registered, through one node is in the listing through the others at once
// (placement and `hutch node list` act on it), and one removed is gone. And
// servers started together, each on its own node, all open the buckets and
// streams the first of them makes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { FleetEvents } from "../src/fleet/events.ts";
import { Cordons, fleetBucket } from "../src/fleet/lease.ts";
import { listNodes, registerNode } from "../src/fleet/nodes.ts";
import { Bucket } from "../src/store/jetstream/kv.ts";
import { JetStreamSessionLog } from "../src/store/jetstream/session-log.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

let nats: NatsCluster;
const conns: NatsConnection[] = [];

beforeAll(async () => {
  nats = await startNatsCluster(3);
  // Each client on one node only, so a read is answered through that node.
  for (const url of nats.urls) conns.push(await connect({ servers: [url], ignoreClusterUpdates: true }));
}, 60_000);

afterAll(async () => {
  for (const nc of conns) await nc.close();
  await nats?.stop();
});

const ROUNDS = 30;

describe("servers started together", () => {
  test("three opening the same bucket or stream at once, each through its own node, all open it", async () => {
    // The first ones opened here: the session stream and the fleet's event stream, then fresh buckets.
    await Promise.all(conns.map((nc) => JetStreamSessionLog.open(nc)));
    await Promise.all(conns.map((nc) => FleetEvents.open(nc)));
    for (let i = 0; i < 5; i++) {
      const opened = await Promise.all(conns.map((nc) => Bucket.open(nc, `hutch-race-${i}`, 3, 30_000)));
      expect(opened.map((b) => b.stream)).toEqual([`KV_hutch-race-${i}`, `KV_hutch-race-${i}`, `KV_hutch-race-${i}`]);
    }
  }, 120_000);
});

describe("the fleet's listings, through any node", () => {
  test("a cordon set or lifted through one node is listed so through the others at once", async () => {
    const cordons = await Promise.all(conns.map(async (nc) => new Cordons(await fleetBucket(nc), await jetstreamManager(nc))));
    const wrong: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const node = `n${i}`;
      const writer = cordons[i % 3]!;
      await writer.set(node, true);
      for (const [k, c] of cordons.entries()) if (!(await c.list()).includes(node)) wrong.push(`${node} set, not listed through node ${k}`);
      await writer.set(node, false);
      for (const [k, c] of cordons.entries())
        if ((await c.list()).includes(node)) wrong.push(`${node} lifted, still listed through node ${k}`);
    }
    expect(wrong).toEqual([]);
  }, 120_000);

  test("a server registered through one node is listed through the others at once, and gone once it stops", async () => {
    const wrong: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const name = `s${i}`;
      const reg = await registerNode(conns[i % 3]!, { name, listen: `https://127.0.0.1:${1000 + i}`, server: `srv${i}` });
      for (const [k, nc] of conns.entries())
        if (!(await listNodes(nc)).some((n) => n.name === name)) wrong.push(`${name} registered, not listed through node ${k}`);
      await reg.stop();
      for (const [k, nc] of conns.entries())
        if ((await listNodes(nc)).some((n) => n.name === name)) wrong.push(`${name} stopped, still listed through node ${k}`);
    }
    expect(wrong).toEqual([]);
  }, 120_000);
});
