// The snapshot backend's contract on JetStream (an object store bucket for the
// bytes, a KV bucket for the names) on a real 3-node nats-server cluster, each
// handle its own connection to a different node, as another hutch server.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { Objm } from "@nats-io/obj";
import { connect } from "@nats-io/transport-node";
import { JetStreamBackend } from "../src/snapshot/jetstream.ts";
import type { SnapshotBackend } from "../src/store/types.ts";
import { describeSnapshotBackendContract } from "./contracts/snapshot-backend.contract.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 60_000);
afterAll(() => cluster?.stop());

let buckets = 0;
describeSnapshotBackendContract("JetStream, 3 nodes", () => {
  const bucket = `snaps${++buckets}`;
  let opened = 0;
  return {
    open: async () => {
      const k = opened++ % cluster.urls.length;
      const nc = await connect({ servers: [...cluster.urls.slice(k), ...cluster.urls.slice(0, k)] });
      const backend: SnapshotBackend = await JetStreamBackend.open(nc, bucket);
      return {
        store: backend,
        close: async () => {
          backend.close();
          await nc.close();
        },
      };
    },
    dispose: async () => {
      const nc = await connect({ servers: cluster.urls });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(`KV_${bucket}-names`).catch(() => false);
      await jsm.streams.delete(`OBJ_${bucket}`).catch(() => false);
      await nc.close();
    },
  };
});

describe("SnapshotBackend on JetStream", () => {
  test("both buckets are replicated 3 times, and the loser of a racing put leaves no bytes behind", async () => {
    const nc = await connect({ servers: cluster.urls });
    const other = await connect({ servers: [cluster.urls[1]!] });
    try {
      const [a, b] = await Promise.all([JetStreamBackend.open(nc, "replicas"), JetStreamBackend.open(other, "replicas")]);
      const jsm = await jetstreamManager(nc);
      for (const s of ["KV_replicas-names", "OBJ_replicas"]) expect((await jsm.streams.info(s)).config.num_replicas).toBe(3);
      const name = "ab".repeat(32);
      const won = await Promise.all([
        a!.put("packs", name, new Uint8Array(1000).fill(1)),
        b!.put("packs", name, new Uint8Array(1000).fill(2)),
      ]);
      expect(won.filter(Boolean)).toHaveLength(1);
      // One object's bytes, not two: the loser's chunks are purged and its entry marked deleted.
      const objects = await (await new Objm(nc).open("replicas")).list();
      expect(objects.filter((o) => !o.deleted)).toHaveLength(1);
      const chunks = await jsm.streams.info("OBJ_replicas", { subjects_filter: "$O.replicas.C.>" });
      expect(Object.keys(chunks.state.subjects ?? {})).toHaveLength(1);
      a!.close();
      b!.close();
    } finally {
      await nc.close();
      await other.close();
    }
  }, 30_000);

  test("a server's staging directory: kept in its home, a dead process's files swept at open, a live one's kept", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-staging-test-"));
    const nc = await connect({ servers: cluster.urls });
    try {
      const staging = join(dir, "tmp", "snapshot-staging");
      mkdirSync(staging, { recursive: true });
      // A pid no process has (above the kernel's pid_max), and this process's own.
      writeFileSync(join(staging, "4194305-dead"), "half a pack");
      writeFileSync(join(staging, `${process.pid}-live`), "being written");
      const b = await JetStreamBackend.open(nc, "staging", { staging });
      expect(b.stagingDir()).toBe(staging);
      expect(readdirSync(staging)).toEqual([`${process.pid}-live`]);
      b.close();
      expect(existsSync(staging)).toBe(true);
    } finally {
      await nc.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
