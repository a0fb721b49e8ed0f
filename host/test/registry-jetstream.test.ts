// The registry's contract on JetStream KV: a real 3-node nats-server cluster
// (the buckets at replication 3) and a single server (replication 1), each
// handle its own connection, dialling a different node first, as another
// hutch server would. Each test gets buckets of its own.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { HutchError } from "@hutch/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { type BoxEntry, boxKey, type OpRecord } from "../src/store/jetstream/boxes.ts";
import { Bucket } from "../src/store/jetstream/kv.ts";
import { openJetStreamRegistry } from "../src/store/jetstream/registry.ts";
import type { RegistryAsync } from "../src/store/types.ts";
import { describeRegistryContract } from "./contracts/registry.contract.ts";
import type { MakeStorage } from "./contracts/storage.ts";
import { cutProxy, type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

const clusters: { three?: NatsCluster; one?: NatsCluster } = {};
beforeAll(async () => {
  [clusters.three, clusters.one] = await Promise.all([startNatsCluster(3), startNatsCluster(1)]);
}, 90_000);
afterAll(async () => {
  await Promise.all([clusters.three?.stop(), clusters.one?.stop()]);
});

async function dropBuckets(cluster: NatsCluster, bucket: string): Promise<void> {
  const nc = await connect({ servers: cluster.urls });
  const jsm = await jetstreamManager(nc);
  for (const s of [`KV_${bucket}`, `KV_${bucket}-egress`]) await jsm.streams.delete(s).catch(() => false);
  await nc.close();
}

let buckets = 0;
function onCluster(which: "three" | "one"): MakeStorage<RegistryAsync> {
  return () => {
    const cluster = clusters[which]!;
    const bucket = `registry${++buckets}`;
    let opened = 0;
    return {
      open: async () => {
        const k = opened++ % cluster.urls.length;
        const nc = await connect({ servers: [...cluster.urls.slice(k), ...cluster.urls.slice(0, k)] });
        return { store: await openJetStreamRegistry(nc, { bucket }), close: () => nc.close() };
      },
      dispose: () => dropBuckets(cluster, bucket),
    };
  };
}

describeRegistryContract("JetStream KV, 3 nodes", onCluster("three"));
describeRegistryContract("JetStream KV, 1 node", onCluster("one"));

describe("Registry on JetStream KV", () => {
  test("both buckets are replicated 3 times on a 3-node cluster and once on a single server", async () => {
    for (const [which, replicas] of [
      ["three", 3],
      ["one", 1],
    ] as const) {
      const nc = await connect({ servers: clusters[which]!.urls });
      try {
        await openJetStreamRegistry(nc, { bucket: "replicas" });
        const jsm = await jetstreamManager(nc);
        for (const s of ["KV_replicas", "KV_replicas-egress"]) expect((await jsm.streams.info(s)).config.num_replicas).toBe(replicas);
      } finally {
        await nc.close();
        await dropBuckets(clusters[which]!, "replicas");
      }
    }
  }, 30_000);
});

describe("Registry on JetStream KV, faults", () => {
  const op = (id: string, boxId: string, kind: OpRecord["kind"], key: string | null): OpRecord => {
    const at = new Date().toISOString();
    return { id, box_id: boxId, kind, idem_key: key, status: "pending", error: null, created_at: at, updated_at: at };
  };

  test("what a writer that died mid-write left is invisible, and its claims are taken over once abandoned", async () => {
    const cluster = clusters.three!;
    const nc = await connect({ servers: cluster.urls });
    try {
      const { boxes } = await openJetStreamRegistry(nc, { bucket: "crashed", abandonAfterMs: 500 });
      // What the writer stored before it died, as it stored it (kv.ts is how every writer writes).
      const kv = await Bucket.open(nc, "crashed", 3, 5000);
      const at = new Date().toISOString();
      const created = op("op_dead", "box_dead", "create", "create-key");
      const row = {
        id: "box_dead",
        name: "web",
        engine: "process",
        state: "creating",
        desired: "running",
        reason: null,
        config: "{}",
        created_at: at,
        updated_at: at,
      } as const;
      const dead: BoxEntry = { row, state: "pending", ops: [created], aborted: [], order: 0 };
      await kv.create(boxKey("box_dead"), dead);
      await kv.create("op.box_dead.op_dead", created);
      await kv.create("opkey.create-key", { box: "box_dead", op: "op_dead" });
      await kv.create("name.web", { box: "box_dead" });
      expect(await boxes.byName("web")).toBeNull();
      expect(await boxes.byId("box_dead")).toBeNull();
      expect(await boxes.list()).toEqual([]);
      expect(await boxes.op("op_dead")).toBeNull();
      expect(await boxes.opByKey("create-key")).toBeNull();
      // Too fresh to be abandoned: it may still be finishing.
      await expect(boxes.insertBox("web", "process", "running", null)).rejects.toMatchObject({ code: "conflict" });
      await Bun.sleep(600);
      const { box } = await boxes.insertBox("web", "process", "running", "create-key");
      expect(await boxes.byName("web")).toEqual(box);
      expect(await kv.get(boxKey("box_dead"))).toBeNull();
      expect(await boxes.countRows("box_dead")).toBe(0);

      // A request on the live box that claimed its key, then died before its op joined the box.
      await kv.create(`op.${box.id}.op_dead2`, op("op_dead2", box.id, "stop", "stop-key"));
      await kv.create("opkey.stop-key", { box: box.id, op: "op_dead2" });
      expect(await boxes.opByKey("stop-key")).toBeNull();
      expect(await boxes.op("op_dead2")).toBeNull();
      expect((await boxes.pendingOps(box.id)).map((o) => o.kind)).toEqual(["create"]);
      await expect(boxes.request(box.id, "stop", "stopped", "stop-key")).rejects.toMatchObject({ code: "conflict" });
      await Bun.sleep(600);
      const stop = await boxes.request(box.id, "stop", "stopped", "stop-key");
      expect(await boxes.opByKey("stop-key")).toEqual(stop);
      expect((await boxes.pendingOps(box.id)).map((o) => o.id)).toEqual([(await boxes.opByKey("create-key"))!.id, stop.id]);
      expect(await boxes.op("op_dead2")).toBeNull();
      await boxes.deleteBox(box.id);
      expect(await boxes.countRows(box.id)).toBe(0);
    } finally {
      await nc.close();
      await dropBuckets(cluster, "crashed");
    }
  }, 30_000);

  test("a server cut off from the cluster is refused with an error naming the cluster, and its unfinished insert never shows", async () => {
    const cluster = clusters.three!;
    const proxy = cutProxy(cluster.nodes[0]!.port);
    // No gossip: cut off means cut off, not reconnected to the other nodes the cluster advertises.
    const cutNc = await connect({ servers: [proxy.url], reconnectTimeWait: 100, maxReconnectAttempts: -1, ignoreClusterUpdates: true });
    const nc = await connect({ servers: [cluster.urls[1]!] });
    try {
      const cut = await openJetStreamRegistry(cutNc, { bucket: "cut", writeTimeoutMs: 1500 });
      const other = await openJetStreamRegistry(nc, { bucket: "cut" });
      await cut.boxes.insertBox("before", "process", "running", null);
      proxy.cut();
      const refused = cut.boxes.insertBox("during", "process", "running", "during-key");
      await expect(refused).rejects.toBeInstanceOf(HutchError);
      await expect(refused).rejects.toMatchObject({ code: "unavailable" });
      await expect(refused).rejects.toThrow(`NATS cluster "${cluster.name}"`);
      await expect(cut.auth.addUser("alice")).rejects.toMatchObject({ code: "unavailable" });
      expect((await other.boxes.list()).map((b) => b.name)).toEqual(["before"]);
      expect(await other.boxes.opByKey("during-key")).toBeNull();
      proxy.restore();
    } finally {
      proxy.stop();
      await cutNc.close();
      await nc.close();
      await dropBuckets(cluster, "cut");
    }
  }, 30_000);
});
