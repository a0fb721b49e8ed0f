// `hutch --remote` (server mode: TLS on loopback, a token, a pinned
// certificate) against ssh to localhost, measured in the same run:
//   round trip   `hutch --remote srv exec B true` vs `ssh … true`, interleaved
//   throughput   N bytes of zeros through `hutch --remote srv exec B -- cat` vs `ssh … cat`
//
//   bun scripts/bench/remote.ts [--json] [--keep-ssh] [--rounds 30] [--runs 3]
//                               [--bytes 1073741824] [--timeout 120]
//
// The server is `hutch serve` in a fresh home; the client is a second home
// with its own config dir that joined it with a token (the join string on
// stdin). Exit 0 when every run worked, goals met or not; 1 when a run broke.
import { mkdirSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { cpus, release } from "node:os";
import {
  HutchHome,
  describeFailure,
  execFlags,
  execMeasures,
  hutchBin,
  log,
  requireHutch,
  runBench,
  runsVerdict,
  sshPeer,
} from "./lib/env.ts";
import { alternate, median, percentile, round, table, met, num, okOf } from "./lib/stats.ts";

const GOAL_RT_RATIO_MAX = 0.5;
const GOAL_TP_RATIO_MIN = 0.8;
const WARMUP_ROUNDS = 3;
const WARMUP_BYTES = 64 * 1024 * 1024;

const flags = execFlags();
const { rounds: ROUNDS, runs: RUNS, bytes: BYTES, timeoutMs: TIMEOUT_MS } = flags;

type Side = "hutch" | "ssh";
const SIDES: Side[] = ["hutch", "ssh"];
const orderFor = (i: number): Side[] => alternate(SIDES, i);
const BOX = "bench-remote";
const errors: string[] = [];

requireHutch();
const server = new HutchHome();
const client = new HutchHome();
client.env.XDG_CONFIG_HOME = join(client.dir, "config");
client.env.HUTCH_REMOTE = "srv";
let serving: ReturnType<typeof Bun.spawn> | undefined;
let sshArgv: string[] | undefined;

async function cleanup(): Promise<void> {
  log("cleaning up");
  // The client first: it deletes its box through the remote, as a user would.
  await client.dispose();
  await server.dispose();
  serving?.kill("SIGTERM");
  await serving?.exited;
  if (sshArgv && !flags.keepSsh) await sshPeer.stop();
}

/** `hutch serve` on a free loopback port, a user and its token, and the client joined to it. */
async function startRemote(): Promise<string> {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  const logPath = join(server.dir, "serve.log");
  serving = Bun.spawn([server.bin, "serve", "--listen", `127.0.0.1:${port}`], {
    env: server.env,
    stdin: "ignore",
    stdout: openSync(logPath, "a"),
    stderr: openSync(logPath, "a"),
  });
  for (let i = 0; !readFileSync(logPath, "utf8").includes("daemon ready"); i++) {
    if (i > 300 || serving.exitCode !== null) throw new Error(`hutch serve did not start:\n${readFileSync(logPath, "utf8")}`);
    await Bun.sleep(100);
  }
  const user = await server.hutch(["user", "add", "bench"]);
  if (user.code !== 0) throw new Error(describeFailure(user, "hutch user add"));
  const token = await server.hutch(["token", "create", "--user", "bench"]);
  if (token.code !== 0) throw new Error(describeFailure(token, "hutch token create"));
  mkdirSync(client.env.XDG_CONFIG_HOME!, { recursive: true, mode: 0o700 });
  const add = Bun.spawn([client.bin, "remote", "add", "srv", "-"], {
    env: client.env,
    stdin: new TextEncoder().encode(token.stdout),
    stderr: "pipe",
  });
  if ((await add.exited) !== 0) throw new Error(`hutch remote add: ${await new Response(add.stderr).text()}`);
  return `https://127.0.0.1:${port}`;
}

function commandFor(side: Side, cmd: string[]): string[] {
  return side === "hutch" ? [client.bin, "exec", BOX, "--", ...cmd] : [...sshArgv!, ...cmd];
}

const { roundTrip, transfer } = execMeasures<Side>(commandFor, client.env, errors, TIMEOUT_MS);

async function measure(count: number, one: (side: Side) => Promise<number | null>) {
  const out = { hutch: { samples: [] as number[], failed: 0 }, ssh: { samples: [] as number[], failed: 0 } };
  for (let i = 0; i < count; i++)
    for (const side of orderFor(i)) {
      const v = await one(side);
      if (v === null) out[side].failed++;
      else out[side].samples.push(v);
    }
  return out;
}

async function main(): Promise<number> {
  const url = await startRemote();
  log(`server ${url} (home ${server.dir}); client home ${client.dir}`);
  sshArgv = await sshPeer.start();
  log(`peer: ${sshArgv.join(" ")}`);
  await client.createBox(BOX);
  log(`warming up (${WARMUP_ROUNDS} round trips and ${WARMUP_BYTES / 2 ** 20} MiB each)`);
  await measure(WARMUP_ROUNDS, roundTrip);
  await measure(1, (side) => transfer(side, WARMUP_BYTES));
  log(`round trip: ${ROUNDS} each, interleaved`);
  const rt = await measure(ROUNDS, roundTrip);
  log(`throughput: ${RUNS} run(s) of ${BYTES} bytes each, interleaved`);
  const tp = await measure(RUNS, (side) => transfer(side, BYTES));
  const rtRatio = median(rt.hutch.samples) / median(rt.ssh.samples);
  const tpRatio = median(tp.hutch.samples) / median(tp.ssh.samples);
  const report = {
    bench: "remote",
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "", kernel: release(), bun: Bun.version },
    hutch: { binary: hutchBin, build: await client.buildId(), transport: `TLS to ${url}, bearer token, pinned certificate` },
    peer: { argv: sshArgv, version: await sshPeer.version() },
    roundTrip: {
      command: "true",
      rounds: ROUNDS,
      hutch: {
        ok: rt.hutch.samples.length,
        failed: rt.hutch.failed,
        medianMs: round(median(rt.hutch.samples)),
        p90Ms: round(percentile(rt.hutch.samples, 90)),
      },
      ssh: {
        ok: rt.ssh.samples.length,
        failed: rt.ssh.failed,
        medianMs: round(median(rt.ssh.samples)),
        p90Ms: round(percentile(rt.ssh.samples, 90)),
      },
      ratioMedian: round(rtRatio, 3),
      goal: { ratioMax: GOAL_RT_RATIO_MAX, met: rtRatio <= GOAL_RT_RATIO_MAX },
    },
    throughput: {
      command: "cat",
      bytes: BYTES,
      runs: RUNS,
      unit: "MB/s (10^6 bytes per second)",
      hutch: { ok: tp.hutch.samples.length, failed: tp.hutch.failed, medianMBps: round(median(tp.hutch.samples), 1) },
      ssh: { ok: tp.ssh.samples.length, failed: tp.ssh.failed, medianMBps: round(median(tp.ssh.samples), 1) },
      ratioMedian: round(tpRatio, 3),
      goal: { ratioMin: GOAL_TP_RATIO_MIN, met: tpRatio >= GOAL_TP_RATIO_MIN },
    },
    ok: errors.length === 0,
    errors,
  };
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    const { roundTrip: r, throughput: t } = report;
    process.stdout.write(
      `${[
        `hutch --remote (TLS on loopback) vs ssh to 127.0.0.1 — ${report.date}, ${report.machine.cpus} cpus, build ${report.hutch.build}, ${report.peer.version}`,
        "",
        `round trip (\`exec true\`, ${ROUNDS} each, interleaved)`,
        table(
          ["", "ok", "median ms", "p90 ms"],
          SIDES.map((s) => [s, okOf(r[s]), num(r[s].medianMs, 2), num(r[s].p90Ms, 2)]),
        ),
        `ratio hutch/ssh (median): ${num(r.ratioMedian, 3)}   goal ≤ ${GOAL_RT_RATIO_MAX}: ${met(r.goal)}`,
        "",
        `throughput (\`exec cat\`, ${BYTES} bytes, ${RUNS} runs each, interleaved; MB = 10^6 bytes)`,
        table(
          ["", "ok", "median MB/s"],
          SIDES.map((s) => [s, okOf(t[s]), num(t[s].medianMBps, 1)]),
        ),
        `ratio hutch/ssh (median): ${num(t.ratioMedian, 3)}   goal ≥ ${GOAL_TP_RATIO_MIN}: ${met(t.goal)}`,
        "",
        runsVerdict(errors),
      ].join("\n")}\n`,
    );
  }
  return errors.length === 0 ? 0 : 1;
}

await runBench(main, cleanup);
