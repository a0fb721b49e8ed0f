// `hutch exec` against ssh to localhost, measured in the same run:
//   round trip   `hutch exec B true` vs `ssh … true`, interleaved
//   throughput   N bytes of zeros through `hutch exec B -- cat` vs `ssh … cat`
//
//   bun scripts/bench/exec.ts [--json] [--keep-ssh] [--rounds 30] [--runs 3]
//                             [--bytes 1073741824] [--timeout 120]
//
// Exit 0 when every run worked, goals met or not; 1 when a run broke (a
// command failed, hung past --timeout, or delivered the wrong byte count).
import { cpus, release } from "node:os";
import { HutchHome, execFlags, execMeasures, hutchBin, log, requireHutch, runBench, runsVerdict, sshPeer } from "./lib/env.ts";
import { alternate, median, percentile, round, table, met, num, okOf } from "./lib/stats.ts";

const GOAL_RT_RATIO_MAX = 0.3;
const GOAL_TP_RATIO_MIN = 1.0;
const WARMUP_ROUNDS = 3;
const WARMUP_BYTES = 64 * 1024 * 1024;

const flags = execFlags();
const { rounds: ROUNDS, runs: RUNS, bytes: BYTES, timeoutMs: TIMEOUT_MS } = flags;

type Side = "hutch" | "ssh";
const SIDES: Side[] = ["hutch", "ssh"];
/** Pair i runs hutch first when i is even, ssh first when odd, so drift hits both alike. */
const orderFor = (i: number): Side[] => alternate(SIDES, i);

const BOX = "bench-exec";
const errors: string[] = [];

requireHutch();
const home = new HutchHome();
let sshArgv: string[] | undefined;

async function cleanup(): Promise<void> {
  log("cleaning up");
  await home.dispose();
  if (sshArgv && !flags.keepSsh) await sshPeer.stop();
}

function commandFor(side: Side, cmd: string[]): string[] {
  return side === "hutch" ? [home.bin, "exec", BOX, "--", ...cmd] : [...sshArgv!, ...cmd];
}

const { roundTrip, transfer } = execMeasures<Side>(commandFor, home.env, errors, TIMEOUT_MS);

interface Series {
  samples: number[];
  failed: number;
}
const emptySeries = (): Record<Side, Series> => ({ hutch: { samples: [], failed: 0 }, ssh: { samples: [], failed: 0 } });

async function measure(count: number, one: (side: Side) => Promise<number | null>): Promise<Record<Side, Series>> {
  const out = emptySeries();
  for (let i = 0; i < count; i++) {
    for (const side of orderFor(i)) {
      const v = await one(side);
      if (v === null) out[side].failed++;
      else out[side].samples.push(v);
    }
  }
  return out;
}

async function main(): Promise<number> {
  log(`HUTCH_HOME=${home.dir}`);
  sshArgv = await sshPeer.start();
  log(`peer: ${sshArgv.join(" ")}`);
  await home.createBox(BOX);

  log(`warming up (${WARMUP_ROUNDS} round trips and ${WARMUP_BYTES / 2 ** 20} MiB each)`);
  const warm = await measure(WARMUP_ROUNDS, roundTrip);
  const warmTp = await measure(1, (side) => transfer(side, WARMUP_BYTES));
  const warmFailures = [warm, warmTp].flatMap((s) => SIDES.map((side) => s[side].failed)).reduce((a, b) => a + b, 0);
  if (warmFailures > 0) log(`warm-up: ${warmFailures} failed run(s); measuring anyway`);

  log(`round trip: ${ROUNDS} each, interleaved`);
  const rt = await measure(ROUNDS, roundTrip);
  log(`throughput: ${RUNS} run(s) of ${BYTES} bytes each, interleaved`);
  const tp = await measure(RUNS, (side) => transfer(side, BYTES));

  const rtStats = (s: Series) => ({
    ok: s.samples.length,
    failed: s.failed,
    medianMs: round(median(s.samples)),
    p90Ms: round(percentile(s.samples, 90)),
    samplesMs: s.samples.map((x) => round(x)),
  });
  const tpStats = (s: Series) => ({
    ok: s.samples.length,
    failed: s.failed,
    medianMBps: round(median(s.samples), 1),
    samplesMBps: s.samples.map((x) => round(x, 1)),
  });
  const rtRatio = median(rt.hutch.samples) / median(rt.ssh.samples);
  const tpRatio = median(tp.hutch.samples) / median(tp.ssh.samples);
  const report = {
    bench: "exec",
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "", kernel: release(), bun: Bun.version },
    hutch: { binary: hutchBin, build: await home.buildId(), version: (await home.hutch(["--version"])).stdout.trim() },
    peer: { argv: sshArgv, version: await sshPeer.version() },
    roundTrip: {
      command: "true",
      rounds: ROUNDS,
      hutch: rtStats(rt.hutch),
      ssh: rtStats(rt.ssh),
      ratioMedian: round(rtRatio, 3),
      goal: { ratioMax: GOAL_RT_RATIO_MAX, met: rtRatio <= GOAL_RT_RATIO_MAX },
    },
    throughput: {
      command: "cat",
      bytes: BYTES,
      runs: RUNS,
      unit: "MB/s (10^6 bytes per second)",
      hutch: tpStats(tp.hutch),
      ssh: tpStats(tp.ssh),
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
    const lines = [
      `hutch exec vs ssh to 127.0.0.1 — ${report.date}, ${report.machine.cpus} cpus, hutch ${report.hutch.version} (build ${report.hutch.build}), ${report.peer.version}`,
      "",
      `round trip (\`true\`, ${ROUNDS} each, interleaved)`,
      table(
        ["", "ok", "median ms", "p90 ms"],
        SIDES.map((s) => [s, okOf(r[s]), num(r[s].medianMs, 2), num(r[s].p90Ms, 2)]),
      ),
      `ratio hutch/ssh (median): ${num(r.ratioMedian, 3)}   goal ≤ ${GOAL_RT_RATIO_MAX}: ${met(r.goal)}`,
      "",
      `throughput (\`cat\`, ${BYTES} bytes, ${RUNS} runs each, interleaved; MB = 10^6 bytes)`,
      table(
        ["", "ok", "median MB/s", "runs MB/s"],
        SIDES.map((s) => [s, okOf(t[s]), num(t[s].medianMBps, 1), t[s].samplesMBps.map((x) => x.toFixed(1)).join(" ") || "-"]),
      ),
      `ratio hutch/ssh (median): ${num(t.ratioMedian, 3)}   goal ≥ ${GOAL_TP_RATIO_MIN}: ${met(t.goal)}`,
      "",
      runsVerdict(errors),
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  }
  return errors.length === 0 ? 0 : 1;
}

await runBench(main, cleanup);
