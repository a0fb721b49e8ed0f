// The IDE bridge's added latency: from an event appended to its delivery at
// the bridge's client (`hutch ide --stdio`, JSON-RPC over stdio, as the
// extension receives it), against a plain WebSocket subscriber to the same
// session reading the same events in the same run.
//
// Events are appended one per request, each awaited, through the HTTP call
// `hutch session annotate` makes (spawning the CLI 10,000 times would measure
// process start-up, not delivery). Latency = arrival − the moment the append
// request was sent, on one clock (this process).
//
//   bun scripts/bench/ide.ts [--json] [--events 10000]
import { parseArgs } from "node:util";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";
import { HutchHome, log, requireHutch } from "./lib/env.ts";
import { percentile, round, table } from "./lib/stats.ts";

const { values: flags } = parseArgs({ options: { json: { type: "boolean", default: false }, events: { type: "string", default: "10000" } } });
const N = Number(flags.events);

requireHutch();
const home = new HutchHome();
const sock = join(home.dir, "hutch.sock");

const post = (path: string, body: unknown) => home.post(path, body);

const bridge = spawn(home.bin, ["ide", "--stdio"], { env: home.env as NodeJS.ProcessEnv, stdio: ["pipe", "pipe", "inherit"] });
const conn = createMessageConnection(new StreamMessageReader(bridge.stdout!), new StreamMessageWriter(bridge.stdin!));
try {
  log("starting a box and a session");
  await home.createBox("bench-ide");
  const ses = (await post("/v1/sessions", { box: "bench-ide" })) as { id: string };
  await Bun.sleep(500);

  const sentAt = new Map<number, number>();
  const atBridge = new Map<number, number>();
  const atSocket = new Map<number, number>();
  let first = 0;

  conn.onNotification("hutch/events", (n: { events: { seq: number }[] }) => {
    const now = performance.now();
    for (const e of n.events) if (!atBridge.has(e.seq)) atBridge.set(e.seq, now);
  });
  conn.listen();
  await conn.sendRequest("initialize", { processId: process.pid, rootUri: null, capabilities: {} });
  await conn.sendNotification("initialized", {});

  const last = (await (await fetch(`http://localhost/v1/sessions/${ses.id}`, { unix: sock })).json()) as { lastSeq: number };
  first = last.lastSeq + 1;
  await conn.sendRequest("hutch/subscribe", { session: ses.id, from: first });
  const ws = new WebSocket(`ws+unix://${sock}:/v1/sessions/${ses.id}/subscribe?from=${first}`);
  await new Promise<void>((resolve) => (ws.onopen = () => resolve()));
  ws.onmessage = (m) => {
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
  if (atBridge.size < N || atSocket.size < N) throw new Error(`delivered ${atBridge.size} at the bridge and ${atSocket.size} on the socket of ${N}`);

  const lat = (arrived: Map<number, number>) => [...sentAt].map(([seq, t]) => arrived.get(seq)! - t);
  const bridgeMs = lat(atBridge);
  const socketMs = lat(atSocket);
  const stat = (xs: number[]) => ({ p50: round(percentile(xs, 50), 3), p99: round(percentile(xs, 99), 3) });
  const b = stat(bridgeMs);
  const s = stat(socketMs);
  const result = {
    events: N,
    build: await home.buildId(),
    bridge: b,
    websocket: s,
    ratio: { p50: round(b.p50 / s.p50, 2), p99: round(b.p99 / s.p99, 2) },
  };
  ws.close();
  if (flags.json) process.stdout.write(JSON.stringify(result, null, 2) + "\n");
  else {
    process.stdout.write(
      table(
        ["append → delivery (ms)", "bridge (hutch ide)", "plain WebSocket", "bridge/WebSocket"],
        [
          ["p50", String(b.p50), String(s.p50), String(result.ratio.p50)],
          ["p99", String(b.p99), String(s.p99), String(result.ratio.p99)],
        ],
      ) + `\n${N} events, build ${result.build}\n`,
    );
  }
} finally {
  await conn.sendRequest("shutdown").catch(() => undefined);
  await conn.sendNotification("exit").catch(() => undefined);
  conn.dispose();
  bridge.kill();
  await home.dispose();
}
