// The broker against a direct loopback transfer, measured in the same run.
// The upstream is a TLS server on loopback (its CA trusted by the broker
// through config.json); the "box side" connects to the box's own gate
// listener, where the guest's relay delivers every connection from the box.
//   latency      sequential small requests on one kept-alive connection:
//                client → gate → TLS upstream, against client → TLS upstream
//   credentialed 1 GiB download through /<binding>/ (stub swapped for the secret)
//   tunnel       1 GiB download through CONNECT (TLS end to end, untouched)
// Goals: at most 1 ms added per request; at least 80 % of direct throughput.
//
//   bun scripts/bench/broker.ts [--json] [--requests 2000] [--mib 1024]
import { parseArgs } from "node:util";
import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { HutchHome, describeFailure, log, requireHutch } from "./lib/env.ts";
import { median, percentile, round, table } from "./lib/stats.ts";
import { makeTestCa } from "../../tests/fixtures/fake-model/ca.ts";

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    requests: { type: "string", default: "2000" },
    mib: { type: "string", default: "1024" },
  },
});
const REQUESTS = Number(flags.requests);
const BYTES = Number(flags.mib) * 1024 * 1024;
const GOALS = { addedMs: 1, throughputRatio: 0.8 };

requireHutch();
const ca = makeTestCa();
const upstreamProc = Bun.spawn(
  ["bun", join(import.meta.dir, "lib", "tls-upstream.ts"), join(ca.dir, "server.pem"), join(ca.dir, "server.key"), String(BYTES)],
  { stdout: "pipe", stderr: "inherit" },
);
const upstream = { port: await firstLine(upstreamProc.stdout).then(Number) };
if (!Number.isInteger(upstream.port) || upstream.port <= 0) throw new Error("the TLS upstream did not start");

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.trim();
}
const home = new HutchHome();
writeFileSync(
  join(home.dir, "config.json"),
  JSON.stringify({
    bindings: {
      bench: {
        host: "localhost",
        port: upstream.port,
        address: "127.0.0.1",
        ca: ca.caFile,
        header: "x-api-key",
        format: "{secret}",
        secret: "bench",
        methods: ["GET"],
        paths: ["/v1/"],
        env: { BENCH_KEY: "{stub}" },
      },
    },
    broker: { pins: { "bench.example.test": "127.0.0.1" } },
  }),
);

/** One HTTP/1.1 keep-alive connection: send a GET, read one content-length response. */
class Conn {
  private buf: Buffer = Buffer.alloc(0);
  private wake?: () => void;
  constructor(readonly sock: Socket | TLSSocket) {
    sock.on("data", (c: Buffer) => {
      this.buf = this.buf.length === 0 ? c : Buffer.concat([this.buf, c]);
      this.wake?.();
    });
  }
  private async until(pred: () => boolean): Promise<void> {
    while (!pred()) await new Promise<void>((r) => (this.wake = r));
  }
  /** Returns the body length; counts bytes without keeping them. */
  async get(path: string, headers: string): Promise<number> {
    this.sock.write(`GET ${path} HTTP/1.1\r\nhost: localhost\r\n${headers}\r\n`);
    await this.until(() => this.buf.includes("\r\n\r\n"));
    const end = this.buf.indexOf("\r\n\r\n") + 4;
    const head = this.buf.subarray(0, end).toString("latin1");
    if (!head.startsWith("HTTP/1.1 200")) throw new Error(`answer: ${head.split("\r\n")[0]}`);
    const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
    if (!Number.isFinite(length)) throw new Error(`no content-length in ${head}`);
    let have = this.buf.length - end;
    this.buf = Buffer.alloc(0);
    while (have < length) {
      await this.until(() => this.buf.length > 0);
      have += this.buf.length;
      this.buf = Buffer.alloc(0);
    }
    if (have !== length) throw new Error(`read ${have} bytes of ${length}`);
    return length;
  }
  close(): void {
    this.sock.destroy();
  }
}

const direct = () =>
  new Promise<Conn>((resolve, reject) => {
    const s = tlsConnect({ host: "127.0.0.1", port: upstream.port, servername: "localhost", ca: ca.caPem }, () => resolve(new Conn(s)));
    s.once("error", reject);
  });
const viaGate = (gate: string) =>
  new Promise<Conn>((resolve, reject) => {
    const s = netConnect(gate, () => resolve(new Conn(s)));
    s.once("error", reject);
  });
/** CONNECT through the gate, then TLS to the upstream inside the tunnel. */
const viaTunnel = (gate: string) =>
  new Promise<Conn>((resolve, reject) => {
    const s = netConnect(gate);
    s.once("error", reject);
    let got = "";
    const onData = (c: Buffer) => {
      got += c.toString("latin1");
      if (!got.includes("\r\n\r\n")) return;
      s.off("data", onData);
      if (!got.startsWith("HTTP/1.1 200")) return reject(new Error(`CONNECT: ${got.split("\r\n")[0]}`));
      const t = tlsConnect({ socket: s, servername: "localhost", ca: ca.caPem }, () => resolve(new Conn(t)));
      t.once("error", reject);
    };
    s.on("data", onData);
    s.write(`CONNECT bench.example.test:${upstream.port} HTTP/1.1\r\nhost: bench.example.test:${upstream.port}\r\n\r\n`);
  });

async function latency(conn: Conn, path: string, headers: string): Promise<number[]> {
  for (let i = 0; i < 50; i++) await conn.get(path, headers);
  const out: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now();
    await conn.get(path, headers);
    out.push(performance.now() - t0);
  }
  conn.close();
  return out;
}

async function throughput(conn: Conn, path: string, headers: string): Promise<number> {
  const t0 = performance.now();
  const n = await conn.get(path, headers);
  const s = (performance.now() - t0) / 1000;
  conn.close();
  return n / s / (1024 * 1024);
}

try {
  const set = Bun.spawnSync([home.bin, "secret", "set", "bench"], {
    env: home.env as Record<string, string>,
    stdin: new TextEncoder().encode("bench-secret-value"),
  });
  if (set.exitCode !== 0) throw new Error(`hutch secret set failed: ${set.stderr.toString()}`);
  await home.createBox("b", ["--secret", "bench", "--allow", `bench.example.test:${upstream.port}`]);
  const info = await home.hutch(["box", "info", "b", "--json"]);
  const gate = join(home.dir, "boxes", (JSON.parse(info.stdout) as { id: string }).id, "broker.sock");
  const env = await home.hutch(["exec", "b", "--", "printenv", "BENCH_KEY"]);
  if (env.code !== 0) throw new Error(describeFailure(env, "printenv BENCH_KEY in the box"));
  const auth = `x-api-key: ${env.stdout.trim()}\r\n`;

  log(`latency: ${REQUESTS} sequential requests each way`);
  const d = await latency(await direct(), "/v1/small", "");
  const g = await latency(await viaGate(gate), "/bench/v1/small", auth);
  const addedP50 = median(g) - median(d);
  const addedP99 = percentile(g, 99) - percentile(d, 99);

  log(`throughput: ${flags.mib} MiB direct, through the credentialed endpoint, and through a CONNECT tunnel (best of 3 each)`);
  const best = async (f: () => Promise<number>) => Math.max(await f(), await f(), await f());
  const tDirect = await best(async () => throughput(await direct(), "/v1/blob", ""));
  const tCred = await best(async () => throughput(await viaGate(gate), "/bench/v1/blob", auth));
  const tTunnel = await best(async () => throughput(await viaTunnel(gate), "/v1/blob", ""));

  const report = {
    build: await home.buildId(),
    requests: REQUESTS,
    latencyMs: {
      direct: { p50: round(median(d), 3), p99: round(percentile(d, 99), 3) },
      gate: { p50: round(median(g), 3), p99: round(percentile(g, 99), 3) },
      addedP50: round(addedP50, 3),
      addedP99: round(addedP99, 3),
    },
    throughputMiBs: { direct: round(tDirect, 0), credentialed: round(tCred, 0), tunnel: round(tTunnel, 0) },
    ratios: { credentialed: round(tCred / tDirect), tunnel: round(tTunnel / tDirect) },
    goals: {
      addedMs: GOALS.addedMs,
      throughputRatio: GOALS.throughputRatio,
      latencyMet: addedP50 <= GOALS.addedMs,
      credentialedMet: tCred / tDirect >= GOALS.throughputRatio,
      tunnelMet: tTunnel / tDirect >= GOALS.throughputRatio,
    },
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    process.stdout.write(
      `${table(
        ["measure", "direct", "broker", "added / ratio", "goal"],
        [
          [
            "request p50 (ms)",
            String(report.latencyMs.direct.p50),
            String(report.latencyMs.gate.p50),
            `+${report.latencyMs.addedP50}`,
            `≤ +${GOALS.addedMs} ${report.goals.latencyMet ? "met" : "MISSED"}`,
          ],
          ["request p99 (ms)", String(report.latencyMs.direct.p99), String(report.latencyMs.gate.p99), `+${report.latencyMs.addedP99}`, ""],
          [
            `${flags.mib} MiB credentialed (MiB/s)`,
            String(report.throughputMiBs.direct),
            String(report.throughputMiBs.credentialed),
            `${report.ratios.credentialed}×`,
            `≥ ${GOALS.throughputRatio} ${report.goals.credentialedMet ? "met" : "MISSED"}`,
          ],
          [
            `${flags.mib} MiB CONNECT tunnel (MiB/s)`,
            String(report.throughputMiBs.direct),
            String(report.throughputMiBs.tunnel),
            `${report.ratios.tunnel}×`,
            `≥ ${GOALS.throughputRatio} ${report.goals.tunnelMet ? "met" : "MISSED"}`,
          ],
        ],
      )}\nbuild ${report.build}\n`,
    );
  }
} finally {
  upstreamProc.kill();
  await home.dispose();
}
