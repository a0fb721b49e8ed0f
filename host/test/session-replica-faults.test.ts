// A fleet server's replica of the session stream (store/jetstream/replica.ts)
// under faults, on a real 3-node nats-server cluster: the node holding its
// consumer, or the node its connection dialled, SIGKILLed and left down.
// Two nodes of three keep the quorum, so the fleet writes on; the replica
// must keep applying what is written, not wait for the dead node's return.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emit, Events } from "@hutch/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { openDb } from "../src/store/db.ts";
import { SessionReplica } from "../src/store/jetstream/replica.ts";
import { JetStreamSessionLog, SESSIONS_STREAM } from "../src/store/jetstream/session-log.ts";
import { SessionStore } from "../src/store/sessions.ts";
import type { NewEvent } from "../src/store/types.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";
import { sessionRow } from "./session-rows.ts";

let cluster: NatsCluster;
const dir = mkdtempSync(join(tmpdir(), "hutch-replica-"));
const conns: NatsConnection[] = [];
const replicas: SessionReplica[] = [];
beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 60_000);
afterAll(async () => {
  for (const r of replicas) await r.close();
  for (const nc of conns) await nc.close().catch(() => {});
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A connection as a fleet server holds one (fleet/connect.ts), dialling `urls` in order. */
async function dial(urls: string[]): Promise<NatsConnection> {
  const nc = await connect({ servers: urls, noRandomize: true, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
  conns.push(nc);
  return nc;
}

let files = 0;
/** A replica in a file of its own, on its own connection. */
async function replicaOn(urls: string[]): Promise<{ replica: SessionReplica; store: SessionStore; nc: NatsConnection }> {
  const nc = await dial(urls);
  const db = openDb(join(dir, `r${files++}.db`));
  const store = new SessionStore(db);
  const replica = await SessionReplica.open(nc, store, db, 5000);
  replicas.push(replica);
  return { replica, store, nc };
}

const note = (text: string): NewEvent => ({ ...emit(Events.annotationAdded, { text }), actor: { kind: "user", id: "w" } });
let sessions = 0;

/** Resolves with whether the replica applied stream record `seq` within `ms`. */
async function reachedWithin(replica: SessionReplica, seq: number, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const reached = await Promise.race([replica.reach(seq).then(() => true as const), late]);
  clearTimeout(timer);
  return reached;
}

/** The node index whose client port `nc` is connected to. */
const nodeOf = (nc: NatsConnection) => cluster.nodes.findIndex((n) => nc.getServer().endsWith(`:${n.port}`));

/** The nodes holding the stream's consumers now. */
async function consumerNodes(nc: NatsConnection): Promise<number[]> {
  const jsm = await jetstreamManager(nc);
  const out: number[] = [];
  for await (const c of jsm.consumers.list(SESSIONS_STREAM)) {
    const at = cluster.nodes.findIndex((n) => n.name === c.cluster?.leader);
    if (at >= 0) out.push(at);
  }
  return out;
}

describe("the session replica under faults", () => {
  for (const which of ["the node holding its consumer", "the node its connection dialled"] as const) {
    test(`${which} killed and left down: the replica applies what the fleet writes meanwhile, and after the node is back`, async () => {
      const writerNc = await dial(cluster.urls);
      const log = await JetStreamSessionLog.open(writerNc, { writeTimeoutMs: 20_000 });
      const { replica, store, nc } = await replicaOn(cluster.urls);
      const id = `ses_rf${sessions++}`;
      await log.insert(sessionRow(id));
      await log.append(id, [note("before")]);
      expect(await reachedWithin(replica, log.streamSeqOf(id), 10_000)).toBe(true);

      const victim = which === "the node its connection dialled" ? nodeOf(nc) : (await consumerNodes(writerNc))[0];
      expect(victim).toBeGreaterThanOrEqual(0);
      await cluster.kill(victim!);
      try {
        for (let i = 0; i < 3; i++) {
          await log.append(id, [note(`down${i}`)]);
          expect(await reachedWithin(replica, log.streamSeqOf(id), 30_000)).toBe(true);
        }
      } finally {
        await cluster.restart(victim!);
      }
      await cluster.ready();
      await log.append(id, [note("after")]);
      expect(await reachedWithin(replica, log.streamSeqOf(id), 30_000)).toBe(true);
      const texts = store
        .readText(id, 1, 100)
        .text.split("\n")
        .map((l) => (JSON.parse(l) as { data: { text: string } }).data.text);
      expect(texts).toEqual(["before", "down0", "down1", "down2", "after"]);
    }, 120_000);
  }
});
