// The IDE bridge (`hutch ide --stdio`, JSON-RPC over stdio, as the extension
// speaks to it), each part against a plain WebSocket client in the same run:
//
//   start     --sessions (200) sessions of --per (5,000) events each: the time
//             from spawning the bridge to a ready sidebar (hutch/list answered
//             with every session and its activity), and to every anchored
//             annotation published as a diagnostic, against a WebSocket client
//             replaying every one of those logs from seq 1 (what the bridge did
//             before summaries). --rounds (3) each, interleaved. Goal: the
//             sidebar in at most 0.1x.
//   latency   --events (10,000) appended one request at a time (the HTTP call
//             `hutch session annotate` makes; spawning the CLI 10,000 times
//             would measure process start-up): append -> delivery at the
//             bridge's client and at a WebSocket subscriber, on one clock.
//
//   bun scripts/bench/ide.ts [--json] [--only start|latency] [--sessions 200] [--per 5000] [--rounds 3] [--events 10000]
import { parseArgs } from "node:util";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { spawn } from "node:child_process";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from "vscode-jsonrpc/node";
import { HutchHome, log, requireHutch } from "./lib/env.ts";
import { median, percentile, round, table } from "./lib/stats.ts";

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    only: { type: "string" },
    sessions: { type: "string", default: "200" },
    per: { type: "string", default: "5000" },
    rounds: { type: "string", default: "3" },
    events: { type: "string", default: "10000" },
  },
});
const SESSIONS = Number(flags.sessions);
const PER = Number(flags.per);
const ROUNDS = Number(flags.rounds);
const N = Number(flags.events);
const START_GOAL = 0.1;
/** Every this many events of a session is an anchored annotation (a diagnostic at start). */
const ANCHOR_EVERY = 1000;

requireHutch();
const home = new HutchHome();
const sock = join(home.dir, "hutch.sock");
const ws = mkdtempSync(join(tmpdir(), "hutch-bench-ws-"));
mkdirSync(join(ws, "src"));

const post = (path: string, body: unknown) => home.post(path, body);
const get = async <T>(path: string): Promise<T> => (await (await fetch(`http://localhost${path}`, { unix: sock })).json()) as T;

interface Bridge {
  conn: MessageConnection;
  stop(): Promise<void>;
}

function startBridge(onNotification: (method: string, params: unknown) => void): Bridge {
  // Warnings only: an info line per (re)connect would bury the bench's own progress.
  const proc = spawn(home.bin, ["ide", "--stdio"], {
    env: { ...home.env, HUTCH_LOG_LEVEL: "warn" } as NodeJS.ProcessEnv,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
  conn.onNotification((method: string, params: unknown) => onNotification(method, params));
  conn.listen();
  return {
    conn,
    async stop() {
      await conn.sendRequest("shutdown").catch(() => undefined);
      await conn.sendNotification("exit").catch(() => undefined);
      const exited = new Promise((r) => proc.once("exit", r));
      await Promise.race([exited, Bun.sleep(3000)]);
      if (proc.exitCode === null) proc.kill("SIGKILL");
      conn.dispose();
    },
  };
}

const anchored = (i: number) => i % ANCHOR_EVERY === 0;
const anchorPath = (s: number) => `src/s${s}.ts`;

function event(s: number, i: number): { kind: string; data: unknown } {
  if (anchored(i))
    return { kind: "annotation.added", data: { text: `look at ${s}/${i}`, anchor: { path: anchorPath(s), line: 1 + i / ANCHOR_EVERY } } };
  if (i % 97 === 0) return { kind: "checkpoint.created", data: { name: `cp ${i}` } };
  return { kind: "annotation.added", data: { text: `session ${s} event ${i} of the benchmark` } };
}

/** SESSIONS open sessions of PER events each; every third ends asking for attention. */
async function seedStart(): Promise<{ ids: string[]; files: Set<string>; anchors: number }> {
  const ids: string[] = [];
  const files = new Set<string>();
  let anchors = 0;
  for (let s = 0; s < SESSIONS; s++) {
    // `sleep` prints nothing, so each log holds exactly what is appended here.
    const { id } = (await post("/v1/sessions", { box: "bench-ide", argv: ["sleep", "86400"], label: `s${s}` })) as { id: string };
    ids.push(id);
  }
  log(`appending ${PER} events to each of ${SESSIONS} sessions`);
  for (let s = 0; s < SESSIONS; s++) {
    const id = ids[s]!;
    let last = (await get<{ lastSeq: number }>(`/v1/sessions/${id}`)).lastSeq;
    const asks = s % 3 === 0;
    while (last < PER) {
      const n = Math.min(1000, PER - last - (asks ? 1 : 0));
      const batch = Array.from({ length: n }, (_, j) => event(s, last + j + 1));
      if (asks && last + n === PER - 1) batch.push({ kind: "attention.required", data: { reason: "approve?" } });
      for (let j = 1; j <= n; j++) {
        if (!anchored(last + j)) continue;
        anchors++;
        files.add(pathToFileURL(join(ws, anchorPath(s))).href);
      }
      last = ((await post(`/v1/sessions/${id}/events`, { events: batch })) as { seqs: number[] }).seqs.at(-1)!;
    }
  }
  return { ids, files, anchors };
}

/** The bridge from spawn to a ready sidebar, and to every anchored annotation published; ms. */
async function bridgeStart(ids: string[], files: Set<string>): Promise<{ sidebar: number; diagnostics: number }> {
  const t0 = performance.now();
  const published = new Set<string>();
  let connected!: () => void;
  const up = new Promise<void>((r) => (connected = r));
  let allPublished!: () => void;
  const diagnosed = new Promise<void>((r) => (allPublished = r));
  if (files.size === 0) allPublished();
  const b = startBridge((method, p) => {
    if (method === "hutch/daemon" && (p as { connected: boolean }).connected) connected();
    if (method === "textDocument/publishDiagnostics") {
      published.add((p as { uri: string }).uri);
      if (published.size === files.size) allPublished();
    }
  });
  try {
    await b.conn.sendRequest("initialize", { processId: process.pid, rootUri: pathToFileURL(ws).href, capabilities: {} });
    await b.conn.sendNotification("initialized", {});
    await up;
    const list = (await b.conn.sendRequest("hutch/list")) as { sessions: { id: string; activity: string; label?: string }[] };
    const sidebar = performance.now() - t0;
    await diagnosed;
    const diagnostics = performance.now() - t0;
    const want = new Set(ids);
    const listed = list.sessions.filter((s) => want.has(s.id));
    if (listed.length !== ids.length) throw new Error(`the bridge listed ${listed.length} of ${ids.length} sessions`);
    const asking = listed.filter((s) => s.activity === "needs-input").length;
    if (asking !== Math.ceil(ids.length / 3)) throw new Error(`${asking} sessions need input, want ${Math.ceil(ids.length / 3)}`);
    return { sidebar, diagnostics };
  } finally {
    await b.stop();
  }
}

/** A WebSocket client replaying every log from seq 1 until each is caught up; ms. */
async function replayAll(ids: string[]): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    ids.map(
      (id) =>
        new Promise<void>((resolve, reject) => {
          const w = new WebSocket(`ws+unix://${sock}:/v1/sessions/${id}/subscribe?from=1`);
          let events = 0;
          w.onmessage = (m) => {
            const text = String(m.data);
            for (let i = text.indexOf('{"session":'); i >= 0; i = text.indexOf('{"session":', i + 1)) events++;
            if (text.includes('{"type":"caught-up"')) {
              w.close();
              if (events < PER) reject(new Error(`replayed ${events} events of ${id}, want ${PER}`));
              else resolve();
            }
          };
          w.onerror = () => reject(new Error(`the subscription to ${id} failed`));
        }),
    ),
  );
  return performance.now() - t0;
}

async function start() {
  log(`creating ${SESSIONS} sessions`);
  const { ids, files, anchors } = await seedStart();
  log("warming up both sides once");
  await replayAll(ids);
  await bridgeStart(ids, files);
  const sidebar: number[] = [];
  const diagnostics: number[] = [];
  const replay: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Interleaved, the bridge first in even rounds, so drift on the machine hits both alike.
    for (const side of r % 2 === 0 ? ["bridge", "replay"] : ["replay", "bridge"]) {
      if (side === "bridge") {
        const t = await bridgeStart(ids, files);
        sidebar.push(t.sidebar);
        diagnostics.push(t.diagnostics);
        log(`round ${r + 1}: bridge ${round(t.sidebar, 1)} ms to the sidebar, ${round(t.diagnostics, 1)} ms to the diagnostics`);
      } else {
        replay.push(await replayAll(ids));
        log(`round ${r + 1}: replay ${round(replay.at(-1)!, 1)} ms`);
      }
    }
  }
  const s = median(replay);
  const ms = (xs: number[]) => xs.map((x) => round(x, 1));
  return {
    sessions: SESSIONS,
    eventsPerSession: PER,
    anchoredAnnotations: anchors,
    rounds: ROUNDS,
    sidebarMs: ms(sidebar),
    diagnosticsMs: ms(diagnostics),
    replayMs: ms(replay),
    ratio: { sidebar: round(median(sidebar) / s, 3), diagnostics: round(median(diagnostics) / s, 3) },
    goal: START_GOAL,
    met: median(sidebar) / s <= START_GOAL,
  };
}

async function latency() {
  const ses = (await post("/v1/sessions", { box: "bench-ide", argv: ["sleep", "86400"] })) as { id: string };
  const sentAt = new Map<number, number>();
  const atBridge = new Map<number, number>();
  const atSocket = new Map<number, number>();
  const b = startBridge((method, p) => {
    if (method !== "hutch/events") return;
    const now = performance.now();
    for (const e of (p as { events: { seq: number }[] }).events) if (!atBridge.has(e.seq)) atBridge.set(e.seq, now);
  });
  let w: WebSocket | undefined;
  try {
    await b.conn.sendRequest("initialize", { processId: process.pid, rootUri: null, capabilities: {} });
    await b.conn.sendNotification("initialized", {});
    const first = (await get<{ lastSeq: number }>(`/v1/sessions/${ses.id}`)).lastSeq + 1;
    await b.conn.sendRequest("hutch/subscribe", { session: ses.id, from: first });
    const sw = new WebSocket(`ws+unix://${sock}:/v1/sessions/${ses.id}/subscribe?from=${first}`);
    w = sw;
    await new Promise<void>((resolve) => (sw.onopen = () => resolve()));
    sw.onmessage = (m) => {
      const now = performance.now();
      for (const line of String(m.data).split("\n")) {
        const seq = /^\{"session":"[^"]+","seq":(\d+)/.exec(line)?.[1];
        if (seq && !atSocket.has(Number(seq))) atSocket.set(Number(seq), now);
      }
    };
    await Bun.sleep(300);

    log(`appending ${N} events one request at a time`);
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      const r = (await post(`/v1/sessions/${ses.id}/annotations`, { text: `bench ${i}` })) as { seq: number };
      sentAt.set(r.seq, t);
    }
    const deadline = Date.now() + 30_000;
    while ((atBridge.size < N || atSocket.size < N) && Date.now() < deadline) await Bun.sleep(50);
    if (atBridge.size < N || atSocket.size < N)
      throw new Error(`delivered ${atBridge.size} at the bridge and ${atSocket.size} on the socket of ${N}`);
  } finally {
    w?.close();
    await b.stop();
  }
  const lat = (arrived: Map<number, number>) => [...sentAt].map(([seq, t]) => arrived.get(seq)! - t);
  const stat = (xs: number[]) => ({ p50: round(percentile(xs, 50), 3), p99: round(percentile(xs, 99), 3) });
  const bridge = stat(lat(atBridge));
  const websocket = stat(lat(atSocket));
  return { events: N, bridge, websocket, ratio: { p50: round(bridge.p50 / websocket.p50, 2), p99: round(bridge.p99 / websocket.p99, 2) } };
}

try {
  log("starting a box");
  await home.createBox("bench-ide");
  const startResult = flags.only === "latency" ? null : await start();
  const latencyResult = flags.only === "start" ? null : await latency();
  const result = {
    build: await home.buildId(),
    ...(startResult ? { start: startResult } : {}),
    ...(latencyResult ? { latency: latencyResult } : {}),
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    const out: string[] = [];
    if (startResult) {
      const s = startResult;
      out.push(
        table(
          ["bridge start (ms)", "median", "runs", "/replay"],
          [
            ["ready sidebar (hutch/list answered)", String(round(median(s.sidebarMs), 1)), s.sidebarMs.join(" "), String(s.ratio.sidebar)],
            [
              "every anchored annotation published",
              String(round(median(s.diagnosticsMs), 1)),
              s.diagnosticsMs.join(" "),
              String(s.ratio.diagnostics),
            ],
            ["WebSocket replay of every log from seq 1", String(round(median(s.replayMs), 1)), s.replayMs.join(" "), "1"],
          ],
        ),
        `ratio ready sidebar / replay (medians): ${s.ratio.sidebar}   goal <= ${s.goal}: ${s.met ? "met" : "missed"}`,
        `${s.sessions} sessions x ${s.eventsPerSession} events, ${s.anchoredAnnotations} anchored annotations, ${s.rounds} rounds interleaved`,
        "",
      );
    }
    if (latencyResult) {
      const l = latencyResult;
      out.push(
        table(
          ["append -> delivery (ms)", "bridge (hutch ide)", "plain WebSocket", "bridge/WebSocket"],
          [
            ["p50", String(l.bridge.p50), String(l.websocket.p50), String(l.ratio.p50)],
            ["p99", String(l.bridge.p99), String(l.websocket.p99), String(l.ratio.p99)],
          ],
        ),
        `${l.events} events`,
        "",
      );
    }
    out.push(`build ${result.build}`);
    process.stdout.write(`${out.join("\n")}\n`);
  }
} finally {
  await home.dispose();
  rmSync(ws, { recursive: true, force: true });
}
