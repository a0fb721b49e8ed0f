// A fleet server's file as the replica of the session stream
// (store/jetstream/replica.ts), on a real 3-node nats-server cluster: two
// servers, each its own connection and SQLite file, writing to the same
// sessions at once. A write resolves only once its own server's file holds
// it (read-your-writes), each server publishes every event once and in
// order, and every replica, one opened after the writes too, ends with the
// same gapless log and its bookmark at the stream's last record.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { openDb } from "../src/store/db.ts";
import { openSessionReplica } from "../src/store/jetstream/replica.ts";
import { SESSIONS_STREAM } from "../src/store/jetstream/session-log.ts";
import { SessionStore } from "../src/store/sessions.ts";
import type { SessionWriter } from "../src/store/types.ts";
import { note, session } from "./contracts/session-log.contract.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

let cluster: NatsCluster;
const closers: (() => Promise<void>)[] = [];
beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 60_000);
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await cluster?.stop();
});

interface Server {
  store: SessionStore;
  writer: SessionWriter;
  /** Every event the server published, as session:seq, in the order it did. */
  published: string[];
  /** The stream sequence its file's bookmark holds. */
  bookmark(): number;
}

/** Server k: its own connection (node k first), file and replica. */
async function server(k: number, writeTimeoutMs?: number): Promise<Server> {
  const nc = await connect({ servers: [...cluster.urls.slice(k), ...cluster.urls.slice(0, k)] });
  const dir = mkdtempSync(join(tmpdir(), "hutch-replica-"));
  const db = openDb(join(dir, "hutch.db"));
  const store = new SessionStore(db);
  const opened = await openSessionReplica(nc, store, db, writeTimeoutMs);
  const published: string[] = [];
  const writer = opened.writer((id, seq) => published.push(`${id}:${seq}`));
  closers.push(async () => {
    await opened.close();
    db.close();
    await nc.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const bookmark = () => (db.query("SELECT applied FROM replicas WHERE stream = ?").get(SESSIONS_STREAM) as { applied: number }).applied;
  return { store, writer, published, bookmark };
}

const texts = (s: Server, id: string) => {
  const { text } = s.store.readText(id, 1, 100_000);
  return text ? text.split("\n").map((l) => JSON.parse(l) as { seq: number; data: { text: string } }) : [];
};

describe("the session stream's replica on each server", () => {
  test("writes through two servers at once: each resolves once its server's file holds it; every replica ends the same", async () => {
    const [a, b] = await Promise.all([server(0), server(1)]);
    const ids = ["ses_r1", "ses_r2", "ses_r3"];
    for (const id of ids) await a.writer.insert(session(id));
    const perServer = 60;
    const unread: string[] = [];
    const writes = [a, b].flatMap((s, k) =>
      Array.from({ length: perServer }, (_, i) => {
        const id = ids[i % ids.length]!;
        const text = `${"ab"[k]}${i}`;
        return s.writer.append(id, [note(text)]).then(([r]) => {
          // Read-your-writes: the event is in this server's own file when the write resolves.
          const line = s.store.readText(id, r!.seq, 1).text;
          if (!line.includes(`"text":"${text}"`)) unread.push(`${text} at ${id}:${r!.seq}`);
          return r!.seq;
        });
      }),
    );
    await Promise.all(writes);
    expect(unread).toEqual([]);

    const c = await server(2);
    const nc = await connect({ servers: cluster.urls });
    const last = (await (await jetstreamManager(nc)).streams.info(SESSIONS_STREAM)).state.last_seq;
    await nc.close();
    // a and b have every record once their last write resolved; c had them all when it opened.
    await a.writer.fresh();
    await b.writer.fresh();
    for (const s of [a, b, c]) {
      expect(s.bookmark()).toBe(last);
      for (const id of ids) {
        const log = texts(s, id);
        expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
        expect(log.map((e) => e.data.text)).toEqual(texts(a, id).map((e) => e.data.text));
      }
    }
    const all = ids.flatMap((id) => texts(a, id).map((e) => e.data.text));
    expect(all.sort()).toEqual(
      [...Array.from({ length: perServer }, (_, i) => `a${i}`), ...Array.from({ length: perServer }, (_, i) => `b${i}`)].sort(),
    );
    // Each server published each event once, and each session's in seq order.
    for (const s of [a, b]) {
      expect(new Set(s.published).size).toBe(2 * perServer);
      for (const id of ids) {
        const seqs = s.published.filter((p) => p.startsWith(`${id}:`)).map((p) => Number(p.split(":")[1]));
        expect(seqs).toEqual(seqs.map((_, i) => i + 1));
      }
    }
  }, 120_000);

  test("a replica that cannot apply: a write through it is refused once it has applied nothing for the write timeout and its recovery's checks, saying the fleet has it; once it applies again the write is there once", async () => {
    const [a, b] = await Promise.all([server(0, 2000), server(1)]);
    await a.writer.insert(session("ses_stuck"));
    await a.writer.append("ses_stuck", [note("before")]);
    const applyBatch = a.store.applyBatch.bind(a.store);
    a.store.applyBatch = () => {
      throw new Error("database or disk is full");
    };
    const err = await a.writer.append("ses_stuck", [note("during", "k-during")]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HutchError);
    expect((err as HutchError).code).toBe("unavailable");
    expect((err as HutchError).message).toContain("the fleet stored these events of session ses_stuck (seq 2-2)");
    expect((err as HutchError).message).toContain("behind the cluster");
    // Reads through it are refused the same way; another server has the write.
    expect(await a.writer.fresh().catch((e: unknown) => (e as HutchError).code)).toBe("unavailable");
    await b.writer.fresh();
    expect(texts(b, "ses_stuck").map((e) => e.data.text)).toEqual(["before", "during"]);
    // Its file takes records again: it catches up, and a retry with the write's key lands nothing twice.
    a.store.applyBatch = applyBatch;
    await a.writer.fresh();
    const [again] = await a.writer.append("ses_stuck", [note("during", "k-during")]);
    expect(again!.fresh).toBe(false);
    expect(texts(a, "ses_stuck").map((e) => e.data.text)).toEqual(["before", "during"]);
  }, 120_000);
});
