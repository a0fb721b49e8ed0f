// The warm pools' sizes on both backends: the server's own table (SQLite, a
// real file, each handle its own connection) and a fleet's KV bucket (a real
// 3-node nats-server cluster, each handle another server's connection), with
// what only the fleet has: each server's report of its pools.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { FleetPools } from "../src/store/jetstream/pools.ts";
import { openDb } from "../src/store/db.ts";
import { PoolTable } from "../src/store/pools.ts";
import type { PoolSizes } from "../src/store/types.ts";
import { describePoolSizesContract } from "./contracts/pool-sizes.contract.ts";
import type { Storage } from "./contracts/storage.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

describePoolSizesContract("SQLite", () => {
  const dir = mkdtempSync(join(tmpdir(), "hutch-pools-"));
  return {
    open: () => {
      const db = openDb(join(dir, "hutch.db"));
      return { store: new PoolTable(db), close: () => db.close() };
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
});

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 90_000);
afterAll(() => cluster?.stop());

let buckets = 0;
const everyoneLive = async () => new Set(["a", "b", "c", "s1", "s2", "s3", "s4"]);

function onFleet(): Storage<PoolSizes> {
  const bucket = `pools${++buckets}`;
  let opened = 0;
  return {
    open: async () => {
      const k = opened % cluster.urls.length;
      const node = `s${++opened}`;
      const nc = await connect({ servers: [...cluster.urls.slice(k), ...cluster.urls.slice(0, k)] });
      const pools = await FleetPools.open(nc, node, everyoneLive, bucket);
      return {
        store: pools,
        close: async () => {
          await pools.close();
          await nc.close();
        },
      };
    },
    dispose: async () => {
      const nc = await connect({ servers: cluster.urls });
      await (await jetstreamManager(nc)).streams.delete(`KV_${bucket}`).catch(() => false);
      await nc.close();
    },
  };
}

describePoolSizesContract("JetStream KV, 3 nodes", onFleet);

describe("a fleet's pools", () => {
  test("a pool set through one server is told to another, which refills on it", async () => {
    const storage = onFleet();
    const [a, b] = [await storage.open(), await storage.open()];
    try {
      let told = 0;
      b.store.onChange(() => told++);
      await a.store.set({ image: "default", engine: "qemu", warm: 2 });
      const deadline = Date.now() + 10_000;
      while (told === 0 && Date.now() < deadline) await Bun.sleep(10);
      expect(told).toBeGreaterThan(0);
      expect(b.store.list()).toEqual([{ image: "default", engine: "qemu", warm: 2 }]);
    } finally {
      await a.close();
      await b.close();
      await storage.dispose();
    }
  });

  test("each server sees the others' live reports, not its own, and a stopped server's report goes", async () => {
    const bucket = `reports${++buckets}`;
    const live = new Set(["a", "b", "c"]);
    const open = async (node: string) => {
      const nc = await connect({ servers: cluster.urls });
      return { nc, pools: await FleetPools.open(nc, node, async () => live, bucket) };
    };
    const [a, b, c] = await Promise.all([open("a"), open("b"), open("c")]);
    try {
      const status = (server: string, ready: number) => ({
        image: "default",
        engine: "qemu" as const,
        server,
        wanted: 2,
        ready,
        filling: 0,
        failed: 0,
      });
      await a.pools.report([status("a", 2)]);
      await c.pools.report([status("c", 1)]);
      const seen = async (by: typeof a) => (await by.pools.elsewhere()).map((s) => `${s.server}:${s.ready}`).sort();
      // Each server follows the bucket: what it shows catches up within a moment, and must then be exactly this.
      const eventually = async (by: typeof a, want: string[]) => {
        const deadline = Date.now() + 10_000;
        while (JSON.stringify(await seen(by)) !== JSON.stringify(want) && Date.now() < deadline) await Bun.sleep(20);
        expect(await seen(by)).toEqual(want);
      };
      await eventually(b, ["a:2", "c:1"]);
      await eventually(a, ["c:1"]);
      await eventually(c, ["a:2"]);
      // A server the node list no longer has is not shown, whatever it last said.
      live.delete("c");
      expect(await seen(b)).toEqual(["a:2"]);
      live.add("c");
      await c.pools.close();
      await eventually(b, ["a:2"]);
    } finally {
      await a.pools.close();
      await b.pools.close();
      for (const x of [a, b, c]) await x.nc.close();
      const nc = await connect({ servers: cluster.urls });
      await (await jetstreamManager(nc)).streams.delete(`KV_${bucket}`).catch(() => false);
      await nc.close();
    }
  }, 60_000);
});
