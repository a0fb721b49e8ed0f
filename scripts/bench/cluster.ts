// hutch's fleet session log against plain JetStream on the same 3-node
// nats-server cluster (loopback, started here), measured in the same run:
//   append, one in flight   POST …/annotations through a fleet server (a claim on
//                           JetStream, answered once its replica applied it) vs
//                           js.publish of an event's line: p50, p99
//   append, N in flight     the same over a few sessions (subjects): appends/s
//   replay                  a session of 100,000 events paged as `hutch session log`
//                           pages it, on another server than the writer's, vs an
//                           ordered consumer reading the session's subject (shown
//                           beside it, no goal: the subscribe WebSocket until it
//                           is caught up)
//   a fresh server          a 4th server started after them, until it serves the
//                           whole log, vs an ordered consumer reading the stream
// and, for the appends in flight, the CPU each side cost per append: the
// hutch servers' and the nats-servers' (from /proc), and the bench's own.
//
//   bun scripts/bench/cluster.ts [--json] [--appends 1000] [--rounds 5]
//        [--concurrent 2000] [--in-flight 16] [--sessions 4] [--events 100000]
//        [--replays 3] [--warmup 50] [--no-fresh] [--hutch PATH]
//
// --hutch measures another build (one kept from before a change), so two
// builds can be compared back to back. --warmup 20000 measures servers
// further along: a fresh server's JIT spends seconds of CPU on optimising
// compiles through its first tens of thousands of appends.
//
// Exit 0 when every run worked, goals met or not; 1 when a run broke.
import { parseArgs } from "node:util";
import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import {
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { connect, type NatsConnection, nanos } from "@nats-io/transport-node";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { API_LIMITS } from "../../shared/src/limits.ts";
import { H } from "../../host/src/store/jetstream/records.ts";
import { SESSIONS_STREAM } from "../../host/src/store/jetstream/session-log.ts";
import { describeFailure, HutchHome, hutchBin, log, positiveInt, requireHutch, run, runBench } from "./lib/env.ts";
import { alternate, median, met, percentile, round, table } from "./lib/stats.ts";

const { values: f } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    appends: { type: "string", default: "1000" },
    rounds: { type: "string", default: "5" },
    concurrent: { type: "string", default: "2000" },
    "in-flight": { type: "string", default: "16" },
    sessions: { type: "string", default: "4" },
    events: { type: "string", default: "100000" },
    replays: { type: "string", default: "3" },
    warmup: { type: "string", default: "50" },
    "no-fresh": { type: "boolean", default: false },
    hutch: { type: "string" },
  },
});
const APPENDS = positiveInt("appends", f.appends!);
const ROUNDS = positiveInt("rounds", f.rounds!);
const CONCURRENT = positiveInt("concurrent", f.concurrent!);
const IN_FLIGHT = positiveInt("in-flight", f["in-flight"]!);
const SESSIONS = positiveInt("sessions", f.sessions!);
const EVENTS = positiveInt("events", f.events!);
const REPLAYS = positiveInt("replays", f.replays!);
/** Appends each side makes before anything is measured: the first 50 one at a time, the rest IN_FLIGHT at a time. */
const WARMUP = positiveInt("warmup", f.warmup!);
const WARMUP_ONE = Math.min(WARMUP, 50);
/** Events per POST when filling the replay's session: what `hutch session log` pages by, and well under NATS's 1 MB payload. */
const FILL_BATCH = 1000;
/** `hutch session log`'s page: the API's largest (cli/session.ts). */
const PAGE = API_LIMITS.eventsPage;
const GOALS = { appendsRatio: 0.8, p50Ratio: 1.5, replayRatio: 0.8 };
const PEER_STREAM = "BENCH_PEER";
const BOX = "bench-fleet";
const HEADERS = { "content-type": "application/json", "x-hutch-client": "cli" };

type Side = "hutch" | "peer";
const SIDES: Side[] = ["hutch", "peer"];
/** The replay's readers: the CLI's pages (the goal's side), the subscribe WebSocket, the stream. */
type ReplaySide = "hutch" | "subscribe" | "direct";
const REPLAY_SIDES: ReplaySide[] = ["hutch", "subscribe", "direct"];
/** The sides in turn, starting one further each round, so none always reads first. */
const rotate = <T>(sides: T[], round: number): T[] => sides.map((_, i) => sides[(i + round) % sides.length]!);

const BINARY = f.hutch ?? hutchBin;
requireHutch(BINARY);
let nats: NatsCluster | undefined;
let nc: NatsConnection | undefined;
const homes: HutchHome[] = [];

async function cleanup(): Promise<void> {
  log("cleaning up");
  for (const h of homes) await h.dispose();
  await nc?.close().catch(() => {});
  await nats?.stop();
}

/** A request to a server's socket: the JSON answer, or an error naming the path. */
async function call(home: HutchHome, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`http://localhost${path}`, {
    method,
    unix: join(home.dir, "hutch.sock"),
    headers: HEADERS,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** A home for a server of the fleet, with the fleet key copied from `keyFrom` (none: this home makes the fleet). */
async function fleetHome(urls: string, keyFrom?: HutchHome): Promise<HutchHome> {
  const h = new HutchHome(BINARY);
  homes.push(h);
  if (keyFrom) {
    mkdirSync(join(h.dir, "keys"), { recursive: true, mode: 0o700 });
    copyFileSync(join(keyFrom.dir, "keys", "fleet.key"), join(h.dir, "keys", "fleet.key"));
    chmodSync(join(h.dir, "keys", "fleet.key"), 0o600);
  } else {
    const init = await run([h.bin, "cluster", "init", "--cluster", urls], { env: h.env, timeoutMs: 60_000 });
    if (init.code !== 0) throw new Error(describeFailure(init, "hutch cluster init"));
  }
  return h;
}

async function fleetServer(node: string, urls: string, keyFrom?: HutchHome): Promise<HutchHome> {
  const h = await fleetHome(urls, keyFrom);
  await h.serve(["--cluster", urls, "--node", node]);
  return h;
}

/** The peer's stream: the session stream's settings (hutch's JetStreamSessionLog.open) under another name. */
async function peerStream(jsm: JetStreamManager): Promise<void> {
  const hutch = await jsm.streams.info(SESSIONS_STREAM);
  await jsm.streams.add({
    name: PEER_STREAM,
    subjects: ["bench.peer.*"],
    num_replicas: hutch.config.num_replicas,
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    duplicate_window: hutch.config.duplicate_window ?? nanos(120_000),
  });
  if (hutch.config.num_replicas !== 3 || hutch.config.storage !== StorageType.File)
    throw new Error(`the session stream has ${hutch.config.num_replicas} replicas on ${hutch.config.storage} storage; expected 3 on file`);
}

/** An event's line as hutch stores it (store/sessions.ts eventLine), for the peer to publish. */
function eventLine(session: string, seq: number, text: string): string {
  return `{"session":"${session}","seq":${seq},"at":"${new Date().toISOString()}","actor":{"kind":"user","id":"root"},"kind":"annotation.added","data":{"text":"${text}"}}`;
}

const noteText = (i: number) => `annotation ${i} of the cluster benchmark`;

interface Appender {
  /** One append to session/subject `s`, resolved when acknowledged. */
  one(s: number, i: number): Promise<void>;
}

function hutchAppender(home: HutchHome, sessions: string[], seen: Map<string, Set<number>>): Appender {
  return {
    async one(s, i) {
      const id = sessions[s]!;
      const { seq } = (await call(home, "POST", `/v1/sessions/${id}/annotations`, { text: noteText(i) })) as { seq: number };
      const got = seen.get(id)!;
      if (got.has(seq)) throw new Error(`session ${id}: seq ${seq} answered twice`);
      got.add(seq);
    },
  };
}

function peerAppender(js: JetStreamClient): Appender {
  let n = 0;
  return {
    async one(s, i) {
      await js.publish(`bench.peer.s${s}`, eventLine(`ses_bench${String(s).padStart(16, "0")}`, ++n, noteText(i)));
    },
  };
}

/** `count` appends one at a time to session 0: each one's latency in ms. */
async function sequential(a: Appender, count: number, offset: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await a.one(0, offset + i);
    out.push(performance.now() - t0);
  }
  return out;
}

/** `count` appends, `inFlight` at a time, worker k on session k mod `sessions`: appends/s. */
async function concurrent(a: Appender, count: number, inFlight: number, sessions: number, offset: number): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async (_, k) => {
      while (next < count) {
        const i = next++;
        await a.one(k % sessions, offset + i);
      }
    }),
  );
  return count / ((performance.now() - t0) / 1000);
}

interface Page {
  events: { seq: number; kind: string }[];
  next: number;
  last: number;
}

/** A whole log, read in the API's largest pages. */
async function readLog(home: HutchHome, id: string): Promise<Page["events"]> {
  const out: Page["events"] = [];
  for (let from = 1; ; ) {
    const page = (await call(home, "GET", `/v1/sessions/${id}/events?from=${from}&limit=10000`)) as Page;
    out.push(...page.events);
    if (page.events.length === 0 || page.next > page.last) return out;
    from = page.next;
  }
}

/** `hutch session log`'s read of a whole log: pages of `page` from seq 1, each parsed. The events read, checked gapless. */
async function replayPaged(home: HutchHome, id: string, page: number): Promise<number> {
  let from = 1;
  let count = 0;
  for (;;) {
    const got = (await call(home, "GET", `/v1/sessions/${id}/events?from=${from}&limit=${page}`)) as Page;
    for (const e of got.events) if (e.seq !== ++count) throw new Error(`replay through hutch: seq ${e.seq} where ${count} was due`);
    if (got.events.length === 0 || got.next > got.last) return count;
    from = got.next;
  }
}

/** The whole log over the subscribe WebSocket (`hutch session subscribe`), until its caught-up line, each event parsed. */
function replaySubscribe(home: HutchHome, id: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${join(home.dir, "hutch.sock")}:/v1/sessions/${id}/subscribe?from=1`);
    let count = 0;
    const fail = (err: Error) => {
      ws.close();
      reject(err);
    };
    ws.onmessage = (m) => {
      for (const line of String(m.data).split("\n")) {
        if (!line) continue;
        const e = JSON.parse(line) as { seq: number; type?: string };
        if (e.type === "caught-up") {
          ws.close();
          return resolve(count);
        }
        if (e.seq !== ++count) return fail(new Error(`replay over subscribe: seq ${e.seq} where ${count} was due`));
      }
    };
    ws.onclose = (e) => reject(new Error(`subscribe closed before it caught up: ${e.code} ${e.reason}`));
  });
}

/** The same read straight from the stream: an ordered consumer on the session's subject, each event line parsed. */
async function replayDirect(js: JetStreamClient, id: string): Promise<number> {
  const consumer = await js.consumers.get(SESSIONS_STREAM, { filter_subjects: `hutch.session.${id}`, deliver_policy: DeliverPolicy.All });
  const messages = await consumer.consume();
  let count = 0;
  try {
    for await (const m of messages) {
      if (m.headers?.get(H.record) === "events")
        for (const line of m.string().split("\n")) {
          const e = JSON.parse(line) as { seq: number };
          if (e.seq !== ++count) throw new Error(`direct replay: seq ${e.seq} where ${count} was due`);
        }
      if (m.info.pending === 0) return count;
    }
    throw new Error("direct replay: the consumer stopped");
  } finally {
    await messages.stop();
  }
}

/** Every record of the session stream through an ordered consumer (what a new replica must apply): how many. */
async function readStream(js: JetStreamClient): Promise<number> {
  const consumer = await js.consumers.get(SESSIONS_STREAM, { deliver_policy: DeliverPolicy.All });
  const messages = await consumer.consume();
  let count = 0;
  try {
    for await (const m of messages) {
      count++;
      m.string();
      if (m.info.pending === 0) return count;
    }
    throw new Error("stream read: the consumer stopped");
  } finally {
    await messages.stop();
  }
}

/** CPU time (user + system, ms) of each group's processes so far: the hutch servers (and of them the writer, servers[0]), the nats-servers, this process. */
function cpuNow(servers: number[], natsDir: string): { hutch: number; writer: number; nats: number; bench: number } {
  const ticks = (pid: string) => {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th (clock ticks, 100 a second).
    const rest = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(rest[11]) + Number(rest[12])) * 10;
  };
  let hutch = 0;
  let writer = 0;
  let nats = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (servers.includes(Number(pid))) {
        const t = ticks(pid);
        hutch += t;
        if (Number(pid) === servers[0]) writer = t;
      } else if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(natsDir)) nats += ticks(pid);
    } catch {
      // gone between the listing and the read
    }
  }
  const own = process.cpuUsage();
  return { hutch, writer, nats, bench: (own.user + own.system) / 1000 };
}

type Cpu = ReturnType<typeof cpuNow>;
/** µs of CPU per append of each group between two readings. */
const cpuPer = (before: Cpu, after: Cpu, count: number): Cpu => ({
  hutch: round(((after.hutch - before.hutch) / count) * 1000, 0),
  writer: round(((after.writer - before.writer) / count) * 1000, 0),
  nats: round(((after.nats - before.nats) / count) * 1000, 0),
  bench: round(((after.bench - before.bench) / count) * 1000, 0),
});

const stats = (ms: number[]) => ({
  p50: round(percentile(ms, 50), 3),
  p99: round(percentile(ms, 99), 3),
  mean: round(ms.reduce((x, y) => x + y, 0) / ms.length, 3),
});

async function main(): Promise<number> {
  log("starting a 3-node nats-server cluster on loopback");
  nats = await startNatsCluster(3);
  const urls = nats.urls.join(",");
  log("starting three fleet servers (a made the fleet; b and c have its key)");
  const a = await fleetServer("a", urls);
  const bHome = await fleetHome(urls, a);
  const bStart = performance.now();
  await bHome.serve(["--cluster", urls, "--node", "b"]);
  // A server's start on a log that holds next to nothing: what d's start on 100,000 events is set against.
  const emptyStartMs = performance.now() - bStart;
  const b = bHome;
  const c = await fleetServer("c", urls, a);
  const build = await a.buildId();
  const natsVersion = (await run(["nats-server", "--version"])).stdout.trim();
  nc = await connect({ servers: nats.urls });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await peerStream(jsm);

  await a.createBox(BOX);
  const sessionIds: string[] = [];
  for (let s = 0; s < SESSIONS; s++) {
    // `sleep` logs nothing of its own: each log holds what the bench appends.
    const { id } = (await call(a, "POST", "/v1/sessions", { box: BOX, argv: ["sleep", "86400"] })) as { id: string };
    sessionIds.push(id);
  }
  const seen = new Map(sessionIds.map((id) => [id, new Set<number>()]));
  const appenders: Record<Side, Appender> = { hutch: hutchAppender(a, sessionIds, seen), peer: peerAppender(js) };
  let offset = 0;

  log(`warming up: ${WARMUP} appends each`);
  for (const side of SIDES) {
    await sequential(appenders[side], WARMUP_ONE, offset);
    if (WARMUP > WARMUP_ONE) await concurrent(appenders[side], WARMUP - WARMUP_ONE, IN_FLIGHT, SESSIONS, offset + WARMUP_ONE);
  }
  offset += WARMUP;

  const perRound = Math.ceil(APPENDS / ROUNDS);
  log(`append, one in flight: ${ROUNDS} rounds of ${perRound} each, interleaved`);
  const lat: Record<Side, number[]> = { hutch: [], peer: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const side of alternate(SIDES, r)) lat[side].push(...(await sequential(appenders[side], perRound, offset)));
    offset += perRound;
  }

  log(`append, ${IN_FLIGHT} in flight over ${SESSIONS} sessions: ${ROUNDS} rounds of ${CONCURRENT} each, interleaved`);
  const rate: Record<Side, number[]> = { hutch: [], peer: [] };
  const cpu: Record<Side, Cpu[]> = { hutch: [], peer: [] };
  const pids = [a, b, c].map((h) => h.servePid!);
  for (let r = 0; r < ROUNDS; r++) {
    for (const side of alternate(SIDES, r)) {
      const before = cpuNow(pids, nats.dir);
      rate[side].push(await concurrent(appenders[side], CONCURRENT, IN_FLIGHT, SESSIONS, offset));
      cpu[side].push(cpuPer(before, cpuNow(pids, nats.dir), CONCURRENT));
    }
    offset += CONCURRENT;
  }
  // Every answer was a seq of its own; each log (as c has it) must hold exactly those annotations, gapless.
  for (const [id, got] of seen) {
    const events = await readLog(c, id);
    const notes = events.filter((e) => e.kind === "annotation.added").map((e) => e.seq);
    const answered = [...got].sort((x, y) => x - y);
    if (events.some((e, i) => e.seq !== i + 1) || notes.join() !== answered.join())
      throw new Error(`session ${id}: ${got.size} appends answered; c's log holds ${notes.length} annotations of ${events.length} events`);
  }

  log(`replay: filling a session with ${EVENTS} events through a (${FILL_BATCH} a request)`);
  const { id: big } = (await call(a, "POST", "/v1/sessions", { box: BOX, argv: ["sleep", "86400"] })) as { id: string };
  const fill0 = performance.now();
  for (let i = 0; i < EVENTS; i += FILL_BATCH) {
    const n = Math.min(FILL_BATCH, EVENTS - i);
    await call(a, "POST", `/v1/sessions/${big}/events`, {
      events: Array.from({ length: n }, (_, j) => ({ kind: "annotation.added", data: { text: noteText(i + j) } })),
    });
  }
  const fillMs = performance.now() - fill0;
  // The log is the session's own first events (its start) and the fill; b has read them all once its log answers them.
  const total = ((await call(a, "GET", `/v1/sessions/${big}/events?from=1&limit=1`)) as Page).last;
  const atB = (await call(b, "GET", `/v1/sessions/${big}/events?from=${total}&limit=1`)) as Page;
  if (total < EVENTS || atB.last !== total)
    throw new Error(`b's log of ${big} ends at ${atB.last}, a's at ${total}; ${EVENTS} were written`);

  log(`replay: ${REPLAYS} reads of the ${total} events each way, through b and from the stream, in turn`);
  const readers: Record<ReplaySide, () => Promise<number>> = {
    hutch: () => replayPaged(b, big, PAGE),
    subscribe: () => replaySubscribe(b, big),
    direct: () => replayDirect(js, big),
  };
  const replay: Record<ReplaySide, number[]> = { hutch: [], subscribe: [], direct: [] };
  for (let r = 0; r < REPLAYS; r++)
    for (const side of rotate(REPLAY_SIDES, r)) {
      const t0 = performance.now();
      const n = await readers[side]();
      const ms = performance.now() - t0;
      if (n !== total) throw new Error(`replay (${side}) read ${n} events, not ${total}`);
      replay[side].push(n / (ms / 1000));
    }

  let fresh: { serverMs: number; streamMs: number; records: number; emptyStartMs: number } | null = null;
  if (!f["no-fresh"]) {
    log("a fresh server: d starts after the fill, until its log of the session is whole");
    const d = await fleetHome(urls, a);
    const t0 = performance.now();
    await d.serve(["--cluster", urls, "--node", "d"]);
    const atD = (await call(d, "GET", `/v1/sessions/${big}/events?from=${total}&limit=1`)) as Page;
    const serverMs = performance.now() - t0;
    if (atD.last !== total || atD.events[0]?.seq !== total) throw new Error(`d's log of ${big} ends at ${atD.last}, not ${total}`);
    const t1 = performance.now();
    const records = await readStream(js);
    fresh = { serverMs, streamMs: performance.now() - t1, records, emptyStartMs };
  }

  const result = summarise({
    build,
    natsVersion,
    line: eventLine(sessionIds[0]!, 1, noteText(0)),
    lat,
    rate,
    cpu,
    total,
    fillMs,
    replay,
    fresh,
  });
  if (f.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else report(result);
  return 0;
}

function report(r: Result): void {
  const one = r.appendOneInFlight;
  const conc = r.appendConcurrent;
  const rep = r.replay;
  const out: string[] = [];
  out.push(
    `append, one in flight (${one.samples} each, interleaved; ms)`,
    table(
      ["", "p50", "p99", "mean"],
      [
        ["hutch (annotate via a)", String(one.hutchMs.p50), String(one.hutchMs.p99), String(one.hutchMs.mean)],
        ["js.publish", String(one.peerMs.p50), String(one.peerMs.p99), String(one.peerMs.mean)],
      ],
    ),
    `ratio hutch/publish: p50 ${one.ratioP50}, p99 ${one.ratioP99}   goal p50 ≤ ${GOALS.p50Ratio}: ${met(one)}`,
    "",
    `append, ${IN_FLIGHT} in flight over ${SESSIONS} sessions/subjects (${ROUNDS} rounds of ${CONCURRENT}, interleaved; appends/s)`,
    table(
      ["", "median", "runs"],
      [
        ["hutch (annotate via a)", String(conc.hutchPerSecond), conc.hutchRuns.join(" ")],
        ["js.publish", String(conc.peerPerSecond), conc.peerRuns.join(" ")],
      ],
    ),
    `ratio hutch/publish: ${conc.ratio}   goal ≥ ${GOALS.appendsRatio}: ${met(conc)}`,
    `CPU per append, µs (median of rounds): hutch side: hutch servers ${conc.cpuUsPerAppend.hutch.hutch} (a ${conc.cpuUsPerAppend.hutch.writer}, b and c ${conc.cpuUsPerAppend.hutch.hutch - conc.cpuUsPerAppend.hutch.writer}), nats-servers ${conc.cpuUsPerAppend.hutch.nats}, bench ${conc.cpuUsPerAppend.hutch.bench}; publish side: nats-servers ${conc.cpuUsPerAppend.peer.nats}, bench ${conc.cpuUsPerAppend.peer.bench}`,
    "",
    `replay of ${rep.events} events written through a (${FILL_BATCH} a request, ${rep.fillMs} ms), read ${REPLAYS} times each way, in turn (events/s)`,
    table(
      ["", "median", "runs"],
      [
        [`hutch via b, pages of ${PAGE} (session log)`, String(rep.hutchPerSecond), rep.hutchRuns.join(" ")],
        ["ordered consumer on the subject", String(rep.directPerSecond), rep.directRuns.join(" ")],
        ["hutch via b, subscribe WebSocket", String(rep.subscribePerSecond), rep.subscribeRuns.join(" ")],
      ],
    ),
    `ratio hutch/direct (pages of ${PAGE}): ${rep.ratio}   goal ≥ ${GOALS.replayRatio}: ${met(rep)}   (subscribe: ${round(rep.subscribePerSecond / rep.directPerSecond, 3)}; no goal)`,
  );
  if (r.freshServer)
    out.push(
      "",
      `a fresh server (d) until it serves the whole log: ${r.freshServer.serverMs} ms (b's start on a near-empty log: ${r.freshServer.emptyStartMs} ms); an ordered consumer reading the stream's ${r.freshServer.streamRecords} records: ${r.freshServer.streamMs} ms (${r.freshServer.ratio}x, no goal)`,
    );
  out.push(
    "",
    `build ${r.build}, ${r.natsServer}, ${r.cores} cores; event line ${r.eventLineBytes} bytes; ${r.warmupAppends} warm-up appends each; 3 nats-server nodes, streams with 3 replicas on file storage`,
  );
  process.stdout.write(`${out.join("\n")}\n`);
}

function summarise(m: {
  build: string;
  natsVersion: string;
  line: string;
  lat: Record<Side, number[]>;
  rate: Record<Side, number[]>;
  cpu: Record<Side, Cpu[]>;
  total: number;
  fillMs: number;
  replay: Record<ReplaySide, number[]>;
  fresh: { serverMs: number; streamMs: number; records: number; emptyStartMs: number } | null;
}) {
  const lh = stats(m.lat.hutch);
  const lp = stats(m.lat.peer);
  const appendsHutch = median(m.rate.hutch);
  const appendsPeer = median(m.rate.peer);
  const replayRate = median(m.replay.hutch);
  const directRate = median(m.replay.direct);
  const cpuMedian = (l: Cpu[]): Cpu => ({
    hutch: median(l.map((x) => x.hutch)),
    writer: median(l.map((x) => x.writer)),
    nats: median(l.map((x) => x.nats)),
    bench: median(l.map((x) => x.bench)),
  });
  return {
    build: m.build,
    natsServer: m.natsVersion,
    cores: cpus().length,
    stream: { replicas: 3, storage: "file" },
    eventLineBytes: m.line.length,
    warmupAppends: WARMUP,
    appendOneInFlight: {
      samples: m.lat.hutch.length,
      hutchMs: lh,
      peerMs: lp,
      ratioP50: round(lh.p50 / lp.p50, 3),
      ratioP99: round(lh.p99 / lp.p99, 3),
      goal: GOALS.p50Ratio,
      met: lh.p50 / lp.p50 <= GOALS.p50Ratio,
    },
    appendConcurrent: {
      inFlight: IN_FLIGHT,
      sessions: SESSIONS,
      appendsPerRound: CONCURRENT,
      hutchPerSecond: round(appendsHutch, 0),
      peerPerSecond: round(appendsPeer, 0),
      hutchRuns: m.rate.hutch.map((x) => round(x, 0)),
      peerRuns: m.rate.peer.map((x) => round(x, 0)),
      ratio: round(appendsHutch / appendsPeer, 3),
      goal: GOALS.appendsRatio,
      met: appendsHutch / appendsPeer >= GOALS.appendsRatio,
      /** µs of CPU per append (medians of the rounds): the three hutch servers together (writer: a's part), the three nats-servers, the bench. */
      cpuUsPerAppend: { hutch: cpuMedian(m.cpu.hutch), peer: cpuMedian(m.cpu.peer) },
    },
    replay: {
      events: m.total,
      fillMs: round(m.fillMs, 0),
      hutchPerSecond: round(replayRate, 0),
      directPerSecond: round(directRate, 0),
      hutchRuns: m.replay.hutch.map((x) => round(x, 0)),
      directRuns: m.replay.direct.map((x) => round(x, 0)),
      ratio: round(replayRate / directRate, 3),
      goal: GOALS.replayRatio,
      met: replayRate / directRate >= GOALS.replayRatio,
      /** The same log over b's subscribe WebSocket, no goal. */
      subscribePerSecond: round(median(m.replay.subscribe), 0),
      subscribeRuns: m.replay.subscribe.map((x) => round(x, 0)),
    },
    freshServer: m.fresh && {
      serverMs: round(m.fresh.serverMs, 0),
      /** b's start, when the log held next to nothing. */
      emptyStartMs: round(m.fresh.emptyStartMs, 0),
      streamRecords: m.fresh.records,
      streamMs: round(m.fresh.streamMs, 0),
      ratio: round(m.fresh.serverMs / m.fresh.streamMs, 2),
    },
  };
}
type Result = ReturnType<typeof summarise>;

await runBench(main, cleanup);
