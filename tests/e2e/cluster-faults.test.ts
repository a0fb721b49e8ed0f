// A fleet under faults, through hutch: three `hutch serve --cluster` servers
// (A, B, C) on a real 3-node NATS JetStream cluster on loopback, and a fourth
// (D) whose only link to the cluster is a proxy the test cuts. The lines
// issue 29 draws, each proven through the daemons' API and CLI:
// - 20 clients append 500 annotations each through all three servers while
//   the session stream's leader is SIGKILLed and restarted twice: every
//   acknowledged annotation is logged once at the seq it was acknowledged
//   with, gapless, the same on every server, and a watcher on each server
//   sees it all;
// - D, cut off, refuses writes naming the cluster while the others write on;
//   linked again, its retry (same idempotency key) lands once and its replica
//   shows what the others wrote meanwhile;
// - each node killed and restarted in turn: every server's replica keeps
//   following (a watcher on each server sees every event).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { SessionEvent } from "../../shared/src/index.ts";
import { SESSIONS_STREAM } from "../../host/src/store/jetstream/session-log.ts";
import { type CutProxy, cutProxy, type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { type Home, waitFor } from "../helpers.ts";
import { startServer, type Server, type Watcher, watchSession } from "../remote.ts";

let nats: NatsCluster;
let urls: string;
/** A, B and C: each dials every node. */
const fleet: Server[] = [];
/** D, once started: dials the cluster only through `proxy`. */
let cut: Server | undefined;
let proxy: CutProxy | undefined;
const watchers: Watcher[] = [];

/** The fleet key A's home holds, copied where another server looks for it. */
function copyKey(to: Home): void {
  mkdirSync(join(to.home, "keys"), { recursive: true, mode: 0o700 });
  copyFileSync(join(fleet[0]!.home.home, "keys", "fleet.key"), join(to.home, "keys", "fleet.key"));
  chmodSync(join(to.home, "keys", "fleet.key"), 0o600);
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/**
 * One request to a server's daemon API over its unix socket, as the CLI
 * sends it. Status 0: no answer, within 90 s (a write the fleet cannot
 * acknowledge is refused after its write timeout, 30 s; one that hangs longer
 * is a fault, named in the failure rather than left to the test's timeout).
 */
async function api(s: Server, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  try {
    const res = await fetch(`http://localhost${path}`, {
      method,
      unix: join(s.home.home, "hutch.sock"),
      headers: { "x-hutch-client": "cli", ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(90_000),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  } catch (err) {
    return { status: 0, body: { error: String(err) } };
  }
}

/** An annotation with an idempotency key: the server's answer. */
const annotate = (s: Server, id: string, text: string, key = text) =>
  api(s, "POST", `/v1/sessions/${id}/annotations`, { text }, { "idempotency-key": key });

/** A session's whole log as a server serves it. */
async function logOf(s: Server, id: string): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for (let from = 1; ; ) {
    const r = await api(s, "GET", `/v1/sessions/${id}/events?from=${from}&limit=5000`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const page = r.body as unknown as { events: SessionEvent[]; next: number; last: number };
    out.push(...page.events);
    if (page.events.length === 0 || page.next > page.last) return out;
    from = page.next;
  }
}

/** `hutch session subscribe` on a server, stopped after the test. */
function watch(s: Server, id: string): Watcher {
  const w = watchSession(s.home, id);
  watchers.push(w);
  return w;
}

const textOf = (e: SessionEvent) => (e.data as { text: string }).text;
const notes = (list: SessionEvent[]) => list.filter((e) => e.kind === "annotation.added");
const gapless = (list: SessionEvent[]) => list.map((_, i) => i + 1);
/** What two servers must agree on, event for event. */
const key = (list: SessionEvent[]) => list.map((e) => JSON.stringify([e.seq, e.at, e.actor, e.kind, e.data]));

/** A shell session in A's box: its id. */
async function newSession(): Promise<string> {
  const r = await fleet[0]!.home.run(["run", "w", "--detach", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { id: string }).id;
}

/**
 * Waits until each watcher has printed `log` whole, then checks it printed
 * exactly that; `more`: the session's shell may log its prompt after `log`
 * was read, so `log` need only be what it printed first.
 */
async function sawAll(ws: Watcher[], log: SessionEvent[], what: string, more = false): Promise<void> {
  for (const [i, w] of ws.entries()) {
    const whole = await waitFor(`watcher ${i}`, () => w.lines().length >= log.length, 60_000).catch(() => false);
    if (!whole) throw new Error(`watcher ${i} printed ${w.lines().length} of the ${log.length} events ${what} (${w.trouble()})`);
    expect(key(more ? w.lines().slice(0, log.length) : w.lines())).toEqual(key(log));
  }
}

beforeAll(async () => {
  // Nodes do not tell clients of each other: D, given only the proxy's URL, cannot go around it.
  nats = await startNatsCluster(3, { advertise: false });
  urls = nats.urls.join(",");
  const args = (node: string) => ["--cluster", urls, "--node", node];
  fleet.push(
    await startServer("hutch-xa-", {
      args: args("a"),
      before: async (h) => {
        const init = await h.run(["cluster", "init", "--cluster", urls]);
        expect(init.code, init.stderr).toBe(0);
      },
    }),
  );
  for (const n of ["b", "c"]) fleet.push(await startServer(`hutch-x${n}-`, { args: args(n), before: copyKey }));
  const made = await fleet[0]!.home.run(["box", "create", "w", "--start"]);
  expect(made.code, made.stderr).toBe(0);
}, 180_000);

afterAll(async () => {
  for (const w of watchers) w.stop();
  for (const s of [...fleet, ...(cut ? [cut] : [])]) await s.stop();
  proxy?.stop();
  await nats?.stop();
});

describe("a fleet of hutch servers under NATS faults", () => {
  test("20 clients append 500 annotations each through all three servers while the stream's leader is SIGKILLed and restarted twice: every acknowledged one once, at its seq, gapless, the same on every server and every watcher", async () => {
    const sessions = [await newSession(), await newSession(), await newSession(), await newSession()];
    // A watcher of the first session on each server, across both kills.
    const live = fleet.map((s) => watch(s, sessions[0]!));
    const clients = 20;
    const each = 500;
    const total = clients * each;
    const acked = new Map<string, number>();
    let retries = 0;
    let done = 0;
    // Client w writes through server w % 3 to session w % 4: every session is written through all three servers at once.
    const client = async (w: number) => {
      const s = fleet[w % fleet.length]!;
      const id = sessions[w % sessions.length]!;
      for (let i = 0; i < each; i++) {
        const text = `c${w}-${i}`;
        // Refused as unavailable (the cluster did not answer in time) or unanswered: sent again with the same key, it lands once.
        for (let attempt = 0; ; attempt++) {
          const r = await annotate(s, id, text);
          if (r.status === 200) {
            acked.set(`${id}/${text}`, r.body.seq as number);
            break;
          }
          if ((r.status !== 503 && r.status !== 0) || attempt >= 5)
            throw new Error(`${text} through ${s.url}: ${r.status} ${JSON.stringify(r.body)}`);
          retries++;
        }
        done++;
      }
    };
    const t0 = performance.now();
    const running = Promise.all(Array.from({ length: clients }, (_, w) => client(w)));
    const killed: string[] = [];
    for (const at of [0.3, 0.65]) {
      while (done < total * at) await Bun.sleep(20);
      const victim = await nats.leaderOf(SESSIONS_STREAM);
      killed.push(nats.nodes[victim]!.name);
      await nats.kill(victim);
      await Bun.sleep(2000);
      await nats.restart(victim);
      // The node came back while the clients were still writing.
      expect(done).toBeLessThan(total);
    }
    await running;
    console.log(
      `${total} annotations through 3 servers: ${((performance.now() - t0) / 1000).toFixed(1)} s, ${retries} retried, stream leader killed: ${killed.join(", ")}`,
    );
    await nats.ready();
    expect(acked.size).toBe(total);
    for (const id of sessions) {
      const views = await Promise.all(fleet.map((s) => logOf(s, id)));
      const log = views[0]!;
      for (const v of views.slice(1)) expect(key(v)).toEqual(key(log));
      expect(log.map((e) => e.seq)).toEqual(gapless(log));
      const written = notes(log);
      expect(written.length).toBe(total / sessions.length);
      expect(new Set(written.map(textOf)).size).toBe(written.length);
      for (const e of written) expect(acked.get(`${id}/${textOf(e)}`)).toBe(e.seq);
      if (id === sessions[0]) await sawAll(live, log, "of the first session");
    }
    for (const w of live) w.stop();
  }, 300_000);

  test("a server cut off from the cluster refuses writes naming the cluster while the others write on; linked again, it writes, and its replica shows all the others wrote, nothing acknowledged lost", async () => {
    proxy = cutProxy(nats.nodes[0]!.port);
    cut = await startServer("hutch-xd-", {
      args: ["--cluster", proxy.url, "--node", "d"],
      env: { HUTCH_CLUSTER_WRITE_TIMEOUT_MS: "5000" },
      before: copyKey,
    });
    const d = cut;
    const id = await newSession();
    const acked = new Map<string, number>();
    const ok = async (s: Server, text: string) => {
      const r = await annotate(s, id, text);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      acked.set(text, r.body.seq as number);
    };
    for (let i = 0; i < 5; i++) await ok(d, `d-before-${i}`);
    // D's replica follows what the others write while it is linked; a watcher on D has shown it before the cut.
    await ok(fleet[1]!, "b-before");
    const dWatch = watch(d, id);
    await sawAll([dWatch], await logOf(fleet[0]!, id), "before the cut", true);

    proxy.cut();
    const refused = await d.home.run(["session", "annotate", id, "d-during-cli"]);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toContain(`the NATS cluster "${nats.name}" did not acknowledge`);
    const keyed = await annotate(d, id, "d-during", "d-during-key");
    expect(keyed.status).toBe(503);
    expect(keyed.body.error).toMatchObject({ code: "unavailable", data: { cluster: nats.name } });
    expect((keyed.body.error as { message: string }).message).toContain(`the NATS cluster "${nats.name}" did not acknowledge`);
    // Meanwhile the rest of the fleet writes on.
    for (let i = 0; i < 10; i++) await ok(fleet[i % 3]!, `meanwhile-${i}`);
    // Still cut: the retry is refused again, D writes nothing it cannot have acknowledged.
    expect((await annotate(d, id, "d-during", "d-during-key")).status).toBe(503);

    proxy.restore();
    // D serves again once its client reconnected: the retry with the same key lands once.
    const again = await waitFor(
      "D to write again",
      async () => {
        const r = await annotate(d, id, "d-during", "d-during-key");
        return r.status === 200 ? r : null;
      },
      60_000,
    );
    acked.set("d-during", again.body.seq as number);
    const after = await d.home.run(["session", "annotate", id, "d-after", "--json"]);
    expect(after.code, after.stderr).toBe(0);
    acked.set("d-after", (JSON.parse(after.stdout) as { seq: number }).seq);
    // Nothing acknowledged lost: each once, at its seq, on D as on the others; after what the others wrote meanwhile.
    const log = await logOf(fleet[0]!, id);
    expect(log.map((e) => e.seq)).toEqual(gapless(log));
    for (const [text, seq] of acked)
      expect(
        notes(log)
          .filter((e) => textOf(e) === text)
          .map((e) => e.seq),
      ).toEqual([seq]);
    expect(acked.get("d-during")!).toBeGreaterThan(acked.get("meanwhile-9")!);
    // The refused CLI write was not acknowledged: it is there at most once (a publish sent before the cut may land later).
    expect(notes(log).filter((e) => textOf(e) === "d-during-cli").length).toBeLessThanOrEqual(1);
    for (const s of [...fleet, d]) expect(key(await logOf(s, id))).toEqual(key(log));
    await sawAll([dWatch], log, "through the cut");
    dWatch.stop();
  }, 180_000);

  test("each NATS node SIGKILLed and restarted in turn: every server's replica keeps following, a watcher on each sees every event", async () => {
    const id = await newSession();
    const servers = [...fleet, ...(cut ? [cut] : [])];
    const ws = servers.map((s) => watch(s, id));
    let n = 0;
    const writeThroughAll = async (tag: string) => {
      for (const s of fleet) {
        const r = await annotate(s, id, `${tag}-${n++}`);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
      }
    };
    await writeThroughAll("start");
    // Every watcher open and caught up before the first kill (D's only node is the first killed).
    await sawAll(ws, await logOf(fleet[0]!, id), "before the kills", true);
    for (let i = 0; i < nats.nodes.length; i++) {
      await nats.kill(i);
      // Two nodes of three keep the quorum: the fleet writes on while one is down.
      await writeThroughAll(`down-${nats.nodes[i]!.name}`);
      await nats.restart(i);
      await nats.ready(60_000);
      await writeThroughAll(`up-${nats.nodes[i]!.name}`);
      const log = await logOf(fleet[0]!, id);
      await sawAll(ws, log, `after ${nats.nodes[i]!.name} came back`);
    }
    const log = await logOf(fleet[0]!, id);
    expect(log.map((e) => e.seq)).toEqual(gapless(log));
    expect(notes(log).length).toBe(n);
    for (const s of servers) expect(key(await logOf(s, id))).toEqual(key(log));
    for (const w of ws) w.stop();
  }, 300_000);
});
