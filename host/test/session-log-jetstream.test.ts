// The session log's contract on JetStream: a real 3-node nats-server cluster
// (the stream at replication 3) and a single server (replication 1), each
// handle its own connection, dialling a different node first, as another
// hutch server would.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { jetstreamManager, type MsgRequest } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { JetStreamSessionLog, SESSIONS_STREAM } from "../src/store/jetstream/session-log.ts";
import type { SessionLogAsync } from "../src/store/types.ts";
import { describeSessionLogAsyncContract } from "./contracts/session-log-async.contract.ts";
import { note, read, session } from "./contracts/session-log.contract.ts";
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

  test("appends waiting for the session's lock share one record, each answered with its own seqs in call order; an update made between them stays between", async () => {
    const nc = await connect({ servers: clusters.three!.urls });
    try {
      const log = await JetStreamSessionLog.open(nc);
      await log.insert(session("ses_g"));
      const n = 30;
      // Made in one tick: each waits for the session's lock (the first takes it a microtask later), together.
      const first = log.append("ses_g", [note("first")]);
      const many = Array.from({ length: n }, (_, i) =>
        log.append("ses_g", i % 3 === 0 ? [note(`m${i}`), note(`m${i}b`)] : [note(`m${i}`)]),
      );
      const again = Array.from({ length: 3 }, () => log.append("ses_g", [note("once", "k")]));
      const changed = log.update("ses_g", { pty: "pty_between" });
      const after = log.append("ses_g", [note("after")]);
      const answers = await Promise.all([first, ...many, ...again, after]);
      await changed;

      // Seqs in call order, each call its own, gapless; a repeated key stored once, answered with its seq.
      const fresh = answers.flat().filter((r) => r.fresh);
      expect(fresh.map((r) => r.seq)).toEqual(fresh.map((_, i) => i + 1));
      const keyed = answers.slice(1 + n, 1 + n + 3).map((r) => r[0]!);
      expect(keyed.map((r) => r.fresh)).toEqual([true, false, false]);
      expect(new Set(keyed.map((r) => r.seq)).size).toBe(1);
      const texts = (await read(log, "ses_g")).map((l) => l.data.text);
      expect(texts).toEqual(["first", ...many.flatMap((_, i) => (i % 3 === 0 ? [`m${i}`, `m${i}b`] : [`m${i}`])), "once", "after"]);

      // The stream: every append made before the update in one record, then the update, then the append made after it.
      const jsm = await jetstreamManager(nc);
      const records: { kind: string; count: number; pty?: string }[] = [];
      for (let seq = 1; ; ) {
        const m = await jsm.streams.getMessage(SESSIONS_STREAM, { seq, next_by_subj: "hutch.session.ses_g" } as unknown as MsgRequest);
        if (!m) break;
        const fields = m.header.get("Hutch-Fields");
        records.push({
          kind: m.header.get("Hutch-Record"),
          count: Number(m.header.get("Hutch-Count") || 0),
          ...(fields ? { pty: JSON.parse(fields).pty } : {}),
        });
        seq = m.seq + 1;
      }
      expect(records).toEqual([
        { kind: "row", count: 0 },
        { kind: "events", count: 1 + n + Math.ceil(n / 3) + 1 },
        { kind: "fields", count: 0, pty: "pty_between" },
        { kind: "events", count: 1 },
      ]);
    } finally {
      await (await jetstreamManager(nc)).streams.delete(SESSIONS_STREAM);
      await nc.close();
    }
  }, 30_000);

  test("a gathering stops before its record would pass 256 KiB of events; each append still lands whole", async () => {
    const nc = await connect({ servers: clusters.three!.urls });
    try {
      const log = await JetStreamSessionLog.open(nc);
      await log.insert(session("ses_big"));
      const big = (c: string) => note(c.repeat(100_000));
      const answers = await Promise.all(["a", "b", "c"].map((c) => log.append("ses_big", [big(c)])));
      expect(answers.map((r) => r[0]!.seq)).toEqual([1, 2, 3]);
      const jsm = await jetstreamManager(nc);
      const counts: number[] = [];
      for (let seq = 1; ; ) {
        const m = await jsm.streams.getMessage(SESSIONS_STREAM, { seq, next_by_subj: "hutch.session.ses_big" } as unknown as MsgRequest);
        if (!m) break;
        if (m.header.get("Hutch-Record") === "events") counts.push(Number(m.header.get("Hutch-Count")));
        seq = m.seq + 1;
      }
      expect(counts).toEqual([2, 1]);
      expect((await read(log, "ses_big")).map((l) => l.data.text?.slice(0, 1))).toEqual(["a", "b", "c"]);
    } finally {
      await (await jetstreamManager(nc)).streams.delete(SESSIONS_STREAM);
      await nc.close();
    }
  }, 30_000);
});
