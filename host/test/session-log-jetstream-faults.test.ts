// The JetStream session log under faults, on a real 3-node nats-server
// cluster: a node SIGKILLed and restarted while 20 writers append, two
// writers forced onto one session, and a server cut off from the cluster.
// Three handles, each its own connection dialling a different node first,
// stand for three hutch servers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Actor, emit, Events, HutchError } from "@hutch/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { JetStreamSessionLog, SESSIONS_STREAM } from "../src/store/jetstream/session-log.ts";
import type { NewEvent } from "../src/store/types.ts";
import { sessionRow } from "./session-rows.ts";
import { cutProxy, type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

let cluster: NatsCluster;
const conns: NatsConnection[] = [];
beforeAll(async () => {
  // Nodes do not tell clients of each other: a handle dialled through a cutProxy cannot go around the cut.
  cluster = await startNatsCluster(3, { advertise: false });
}, 60_000);
afterAll(async () => {
  for (const nc of conns) await nc.close().catch(() => {});
  await cluster?.stop();
});

/** A handle as server `k` would hold it: its own connection, node k first, reconnecting for ever. */
async function server(k: number, writeTimeoutMs?: number, servers?: string[]): Promise<JetStreamSessionLog> {
  const urls = servers ?? [...cluster.urls.slice(k), ...cluster.urls.slice(0, k)];
  const nc = await connect({ servers: urls, maxReconnectAttempts: -1, reconnectTimeWait: 100, pingInterval: 1000 });
  conns.push(nc);
  return JetStreamSessionLog.open(nc, writeTimeoutMs ? { writeTimeoutMs } : {});
}

const actor = (id: string): Actor => ({ kind: "user", id });
const note = (who: string, text: string, idempotencyKey?: string): NewEvent => ({
  ...emit(Events.annotationAdded, { text }),
  actor: actor(who),
  ...(idempotencyKey ? { idempotencyKey } : {}),
});
const row = (id: string) => sessionRow(id);

async function lines(log: JetStreamSessionLog, id: string): Promise<{ seq: number; text: string }[]> {
  const { text } = await log.readText(id, 1, 1_000_000);
  return text
    ? text.split("\n").map((l) => {
        const e = JSON.parse(l) as { seq: number; data: { text: string } };
        return { seq: e.seq, text: e.data.text };
      })
    : [];
}

const gapless = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** The node leading the session stream now (asked again while the cluster is electing one). */
async function leader(nc: NatsConnection): Promise<number> {
  const jsm = await jetstreamManager(nc);
  for (let i = 0; ; i++) {
    const info = await jsm.streams.info(SESSIONS_STREAM).catch((err) => {
      if (i > 50) throw err;
    });
    const at = cluster.nodes.findIndex((n) => n.name === info?.cluster?.leader);
    if (at >= 0) return at;
    await Bun.sleep(100);
  }
}

describe("JetStream session log under faults", () => {
  test("20 writers, 500 annotations each, while the stream's leader is SIGKILLed and restarted twice: every acknowledged one once, seqs gapless, tailed whole", async () => {
    const servers = await Promise.all([0, 1, 2].map((k) => server(k)));
    const sessions = ["ses_f1", "ses_f2", "ses_f3", "ses_f4"];
    for (const id of sessions) await servers[0]!.insert(row(id));
    const writers = 20;
    const each = 500;
    let done = 0;
    const acked = new Map<string, number>();
    const write = async (w: number) => {
      const log = servers[w % 3]!;
      const id = sessions[w % sessions.length]!;
      for (let i = 0; i < each; i++) {
        const text = `w${w}-${i}`;
        // A client retries an append that failed, with the same idempotency key, as hutch's clients do.
        for (let attempt = 0; ; attempt++) {
          try {
            const [r] = await log.append(id, [note(`w${w}`, text, text)]);
            acked.set(`${id}/${text}`, r!.seq);
            break;
          } catch (err) {
            if (!(err instanceof HutchError) || attempt > 5) throw err;
          }
        }
        done++;
      }
    };
    const total = writers * each;
    const perSession = total / sessions.length;
    // A reader tailing one session through a third server the whole time: replay, then every new event, across the kills.
    const stop = new AbortController();
    const followed = (async () => {
      const got: { seq: number; text: string }[] = [];
      for await (const l of servers[2]!.follow(sessions[0]!, 1, stop.signal)) {
        got.push({ seq: l.seq, text: (JSON.parse(l.json) as { data: { text: string } }).data.text });
        if (got.length === perSession) break;
      }
      return got;
    })();
    const running = Promise.all(Array.from({ length: writers }, (_, w) => write(w)));
    for (const at of [0.25, 0.6]) {
      while (done < total * at) await Bun.sleep(20);
      const victim = await leader(conns[0]!);
      expect(victim).toBeGreaterThanOrEqual(0);
      await cluster.kill(victim);
      await Bun.sleep(1500);
      await cluster.restart(victim);
    }
    await running;
    await cluster.ready();
    expect(acked.size).toBe(total);
    const timer = setTimeout(() => stop.abort(), 30_000);
    const tailed = await followed;
    clearTimeout(timer);
    expect(tailed).toEqual(await lines(servers[0]!, sessions[0]!));
    for (const id of sessions) {
      const n = perSession;
      const views = await Promise.all(servers.map((s) => lines(s, id)));
      for (const v of views) expect(v).toEqual(views[0]!);
      const got = views[0]!;
      expect(got.map((l) => l.seq)).toEqual(gapless(n));
      expect(new Set(got.map((l) => l.text)).size).toBe(n);
      for (const l of got) expect(acked.get(`${id}/${l.text}`)).toBe(l.seq);
    }
    // The writers really raced: handles were refused and folded what another stored.
    expect(servers.reduce((n, s) => n + s.stats.conflicts, 0)).toBeGreaterThan(0);
  }, 120_000);

  test("two writers forced onto one session at once: one wins each seq, the other retries or fails cleanly; no gap, no duplicate", async () => {
    const [a, b] = await Promise.all([server(0), server(1)]);
    await a!.insert(row("ses_race"));
    const n = 300;
    const mine = async (log: JetStreamSessionLog, tag: string) => {
      const seqs: number[] = [];
      for (let i = 0; i < n; i++) seqs.push((await log.append("ses_race", [note(tag, `${tag}${i}`)]))[0]!.seq);
      return seqs;
    };
    const [sa, sb] = await Promise.all([mine(a!, "a"), mine(b!, "b")]);
    expect(new Set([...sa!, ...sb!]).size).toBe(2 * n);
    expect(a!.stats.conflicts + b!.stats.conflicts).toBeGreaterThan(0);
    const got = await lines(a!, "ses_race");
    expect(got.map((l) => l.seq)).toEqual(gapless(2 * n));
    expect(got.filter((l) => l.text.startsWith("a")).map((l) => l.seq)).toEqual(sa!);

    // Compare-and-set (the driver slot): both read the same last seq and both try; exactly one is stored.
    for (let round = 0; round < 20; round++) {
      const last = await a!.last("ses_race");
      expect(await b!.last("ses_race")).toBe(last);
      const tries = await Promise.allSettled(
        [a!, b!].map((log, k) => log.append("ses_race", [note(`${k}`, `slot${round}-${k}`)], { ifLast: last })),
      );
      const won = tries.filter((t) => t.status === "fulfilled");
      const lost = tries.filter((t): t is PromiseRejectedResult => t.status === "rejected");
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(lost[0]!.reason).toBeInstanceOf(HutchError);
      expect((lost[0]!.reason as HutchError).code).toBe("conflict");
      expect(await a!.last("ses_race")).toBe(last + 1);
    }
    const after = await lines(b!, "ses_race");
    expect(after.map((l) => l.seq)).toEqual(gapless(2 * n + 20));
  }, 60_000);

  test("a server whose link to the cluster is cut refuses writes naming the cluster, and after the link returns nothing acknowledged is lost", async () => {
    const proxy = cutProxy(cluster.nodes[0]!.port);
    try {
      const cut = await server(0, 2000, [proxy.url]);
      const other = await server(1);
      await cut.insert(row("ses_cut"));
      for (let i = 0; i < 10; i++) await cut.append("ses_cut", [note("cut", `before${i}`)]);
      proxy.cut();
      const refused = cut.append("ses_cut", [note("cut", "during", "during-key")]);
      await expect(refused).rejects.toBeInstanceOf(HutchError);
      await expect(refused).rejects.toMatchObject({ code: "unavailable" });
      await expect(refused).rejects.toThrow(`NATS cluster "${cluster.name}"`);
      for (let i = 0; i < 10; i++) await other.append("ses_cut", [note("other", `meanwhile${i}`)]);
      proxy.restore();
      // Served again once reconnected: the retry with the same key lands once, after what the other server stored.
      let again: Awaited<ReturnType<typeof cut.append>> | undefined;
      for (let i = 0; i < 50 && !again; i++)
        again = await cut.append("ses_cut", [note("cut", "during", "during-key")]).catch(() => undefined);
      expect(again?.[0]?.seq).toBeGreaterThan(20);
      await cut.append("ses_cut", [note("cut", "after")]);
      const got = await lines(other, "ses_cut");
      expect(got.map((l) => l.seq)).toEqual(gapless(22));
      expect(got.filter((l) => l.text === "during")).toHaveLength(1);
      for (let i = 0; i < 10; i++) {
        expect(got.filter((l) => l.text === `before${i}`)).toHaveLength(1);
        expect(got.filter((l) => l.text === `meanwhile${i}`)).toHaveLength(1);
      }
      expect(got.at(-1)?.text).toBe("after");
    } finally {
      proxy.stop();
    }
  }, 60_000);

  test("a server whose node lost the quorum refuses writes naming the cluster, and serves again when the quorum is back", async () => {
    const alone = await server(2, 2000, [cluster.urls[2]!]);
    await alone.insert(row("ses_quorum"));
    for (let i = 0; i < 5; i++) await alone.append("ses_quorum", [note("q", `before${i}`)]);
    await Promise.all([cluster.kill(0), cluster.kill(1)]);
    try {
      const refused = alone.append("ses_quorum", [note("q", "during", "q-key")]);
      await expect(refused).rejects.toMatchObject({ code: "unavailable" });
      await expect(refused).rejects.toThrow(`NATS cluster "${cluster.name}"`);
    } finally {
      await Promise.all([cluster.restart(0), cluster.restart(1)]);
    }
    let again: Awaited<ReturnType<typeof alone.append>> | undefined;
    for (let i = 0; i < 50 && !again; i++) again = await alone.append("ses_quorum", [note("q", "during", "q-key")]).catch(() => undefined);
    expect(again?.[0]?.seq).toBe(6);
    const got = await lines(alone, "ses_quorum");
    expect(got.map((l) => l.text)).toEqual(["before0", "before1", "before2", "before3", "before4", "during"]);
  }, 90_000);
});
