// The session log's contract on JetStream: a real 3-node nats-server cluster
// (the stream at replication 3) and a single server (replication 1), each
// handle its own connection, dialling a different node first, as another
// hutch server would.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { JetStreamSessionLog, SESSIONS_STREAM } from "../src/store/jetstream/session-log.ts";
import type { SessionLogAsync } from "../src/store/types.ts";
import { describeSessionLogAsyncContract } from "./contracts/session-log-async.contract.ts";
import type { MakeStorage } from "./contracts/storage.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

const clusters: { three?: NatsCluster; one?: NatsCluster } = {};
beforeAll(async () => {
  [clusters.three, clusters.one] = await Promise.all([startNatsCluster(3), startNatsCluster(1)]);
}, 90_000);
afterAll(async () => {
  await Promise.all([clusters.three?.stop(), clusters.one?.stop()]);
});

function onCluster(which: "three" | "one"): MakeStorage<SessionLogAsync> {
  return () => {
    const cluster = clusters[which]!;
    let opened = 0;
    return {
      open: async () => {
        const k = opened++ % cluster.urls.length;
        const nc = await connect({ servers: [...cluster.urls.slice(k), ...cluster.urls.slice(0, k)] });
        return { store: await JetStreamSessionLog.open(nc), close: () => nc.close() };
      },
      dispose: async () => {
        const nc = await connect({ servers: cluster.urls });
        await (await jetstreamManager(nc)).streams.delete(SESSIONS_STREAM).catch(() => false);
        await nc.close();
      },
    };
  };
}

describeSessionLogAsyncContract("JetStream, 3 nodes", onCluster("three"));
describeSessionLogAsyncContract("JetStream, 1 node", onCluster("one"));

describe("SessionLog on JetStream", () => {
  test("the stream is replicated 3 times on a 3-node cluster and once on a single server", async () => {
    for (const [which, replicas] of [
      ["three", 3],
      ["one", 1],
    ] as const) {
      const nc = await connect({ servers: clusters[which]!.urls });
      try {
        await JetStreamSessionLog.open(nc);
        const info = await (await jetstreamManager(nc)).streams.info(SESSIONS_STREAM);
        expect(info.config.num_replicas).toBe(replicas);
        if (replicas === 3) expect(info.cluster?.replicas?.length).toBe(2);
      } finally {
        await (await jetstreamManager(nc)).streams.delete(SESSIONS_STREAM);
        await nc.close();
      }
    }
  }, 30_000);
});
