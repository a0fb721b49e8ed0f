// How fast the CLI starts, against peers measured in the same run:
//   start-up     `hutch --version` vs a compiled Bun program that prints one line
//   round trip   `hutch exec B true` vs `ssh … true`
//
//   bun scripts/bench/cli.ts [--json] [--keep-ssh] [--rounds 50] [--hutch PATH]
//
// --hutch measures another build of hutch (default dist/hutch), e.g. one kept
// from before a change, so two builds can be compared back to back.
//
// The one-liner is compiled in this run with the flags scripts/build.ts uses,
// so both sides pay the same runtime start; the difference is what hutch
// evaluates before it answers. Exit 0 when every run worked, goals met or
// not; 1 when a run broke (a command failed, hung, or printed the wrong thing).
import { parseArgs } from "node:util";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, release, tmpdir } from "node:os";
import { join } from "node:path";
import { HutchHome, describeFailure, hutchBin, log, requireHutch, run, runBench, runsVerdict, sshPeer } from "./lib/env.ts";
import { median, percentile, round, table, met, num, okOf } from "./lib/stats.ts";

const GOAL_START_RATIO_MAX = 2;
const GOAL_RT_RATIO_MAX = 0.06;
const WARMUP_ROUNDS = 5;

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    "keep-ssh": { type: "boolean", default: false },
    rounds: { type: "string", default: "50" },
    hutch: { type: "string", default: hutchBin },
  },
});
const ROUNDS = Number(flags.rounds);
if (!Number.isSafeInteger(ROUNDS) || ROUNDS <= 0) {
  process.stderr.write(`bench: --rounds ${flags.rounds}: expected a positive integer\n`);
  process.exit(2);
}

const BOX = "bench-cli";
const errors: string[] = [];

requireHutch(flags.hutch);
const home = new HutchHome(flags.hutch);
const peerDir = mkdtempSync(join(tmpdir(), "hutch-bench-oneliner-"));
const oneLiner = join(peerDir, "one-liner");
let sshArgv: string[] | undefined;

async function cleanup(): Promise<void> {
  log("cleaning up");
  await home.dispose();
  rmSync(peerDir, { recursive: true, force: true });
  if (sshArgv && !flags["keep-ssh"]) await sshPeer.stop();
}

/** The start-up peer: the smallest compiled Bun program, built as dist/hutch is. */
async function buildOneLiner(version: string): Promise<void> {
  const src = join(peerDir, "one-liner.ts");
  writeFileSync(src, `console.log(${JSON.stringify(version)});\n`);
  const r = await run(
    ["bun", "build", "--compile", "--minify", "--sourcemap=none", "--bytecode", "--format=esm", src, "--outfile", oneLiner],
    { timeoutMs: 120_000 },
  );
  if (r.code !== 0) throw new Error(describeFailure(r, "bun build --compile (the one-liner)"));
}

type Pair = { name: string; sides: [string, string[], string][] };

/** One run of argv: wall time in ms from spawn to exit, or null (and an error recorded) if it failed or printed the wrong thing. */
async function once(what: string, argv: string[], expect: string): Promise<number | null> {
  const r = await run(argv, { env: home.env, timeoutMs: 30_000 });
  if (r.code === 0 && r.stdout === expect) return r.ms;
  errors.push(r.code === 0 ? `${what}: printed ${JSON.stringify(r.stdout)}, expected ${JSON.stringify(expect)}` : describeFailure(r, what));
  return null;
}

interface Series {
  samples: number[];
  failed: number;
}

/** Runs both sides of a pair `count` times, interleaved, the first side first in even rounds. */
async function measure(pair: Pair, count: number): Promise<Series[]> {
  const out: Series[] = pair.sides.map(() => ({ samples: [], failed: 0 }));
  for (let i = 0; i < count; i++) {
    const order = i % 2 === 0 ? [0, 1] : [1, 0];
    for (const k of order) {
      const [label, argv, expect] = pair.sides[k]!;
      const v = await once(`${pair.name} (${label})`, argv, expect);
      if (v === null) out[k]!.failed++;
      else out[k]!.samples.push(v);
    }
  }
  return out;
}

const stats = (s: Series) => ({
  ok: s.samples.length,
  failed: s.failed,
  medianMs: round(median(s.samples)),
  p90Ms: round(percentile(s.samples, 90)),
  samplesMs: s.samples.map((x) => round(x)),
});

async function main(): Promise<number> {
  log(`HUTCH_HOME=${home.dir}`);
  const version = (await home.hutch(["--version"])).stdout;
  await buildOneLiner(version.trim());
  sshArgv = await sshPeer.start();
  log(`peer: ${sshArgv.join(" ")}`);
  await home.createBox(BOX);

  const start: Pair = {
    name: "start-up",
    sides: [
      ["hutch", [home.bin, "--version"], version],
      ["one-liner", [oneLiner], version],
    ],
  };
  const rt: Pair = {
    name: "round trip",
    sides: [
      ["hutch", [home.bin, "exec", BOX, "--", "true"], ""],
      ["ssh", [...sshArgv, "true"], ""],
    ],
  };

  log(`warming up (${WARMUP_ROUNDS} of each)`);
  const warm = [...(await measure(start, WARMUP_ROUNDS)), ...(await measure(rt, WARMUP_ROUNDS))].reduce((n, s) => n + s.failed, 0);
  if (warm > 0) log(`warm-up: ${warm} failed run(s); measuring anyway`);

  log(`start-up: ${ROUNDS} each, interleaved`);
  const [sh, so] = await measure(start, ROUNDS);
  log(`round trip: ${ROUNDS} each, interleaved`);
  const [rh, rs] = await measure(rt, ROUNDS);

  const startRatio = median(sh!.samples) / median(so!.samples);
  const rtRatio = median(rh!.samples) / median(rs!.samples);
  const report = {
    bench: "cli",
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "", kernel: release(), bun: Bun.version },
    hutch: { binary: home.binary, build: await home.buildId(), version: version.trim() },
    startUp: {
      command: "hutch --version",
      peer: "a compiled Bun program that prints one line (bun build --compile --minify --bytecode --format=esm)",
      rounds: ROUNDS,
      hutch: stats(sh!),
      oneLiner: stats(so!),
      ratioMedian: round(startRatio, 3),
      goal: { ratioMax: GOAL_START_RATIO_MAX, met: startRatio <= GOAL_START_RATIO_MAX },
    },
    roundTrip: {
      command: `hutch exec ${BOX} -- true`,
      peer: { argv: [...sshArgv, "true"], version: await sshPeer.version() },
      rounds: ROUNDS,
      hutch: stats(rh!),
      ssh: stats(rs!),
      ratioMedian: round(rtRatio, 3),
      goal: { ratioMax: GOAL_RT_RATIO_MAX, met: rtRatio <= GOAL_RT_RATIO_MAX },
    },
    ok: errors.length === 0,
    errors,
  };

  if (flags.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    const row = (label: string, s: ReturnType<typeof stats>) => [label, okOf(s), num(s.medianMs, 2), num(s.p90Ms, 2)];
    const { startUp: u, roundTrip: r } = report;
    const lines = [
      `hutch CLI start-up — ${report.date}, ${report.machine.cpus} cpus, hutch ${report.hutch.version} (build ${report.hutch.build}), Bun ${Bun.version}, ${r.peer.version}`,
      "",
      `start-up (\`hutch --version\` vs a compiled one-liner, ${ROUNDS} each, interleaved)`,
      table(["", "ok", "median ms", "p90 ms"], [row("hutch", u.hutch), row("one-liner", u.oneLiner)]),
      `ratio hutch/one-liner (median): ${num(u.ratioMedian, 3)}   goal ≤ ${GOAL_START_RATIO_MAX}: ${met(u.goal)}`,
      "",
      `round trip (\`true\`, ${ROUNDS} each, interleaved)`,
      table(["", "ok", "median ms", "p90 ms"], [row("hutch", r.hutch), row("ssh", r.ssh)]),
      `ratio hutch/ssh (median): ${num(r.ratioMedian, 3)}   goal ≤ ${GOAL_RT_RATIO_MAX}: ${met(r.goal)}`,
      "",
      runsVerdict(errors),
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  }
  return errors.length === 0 ? 0 : 1;
}

await runBench(main, cleanup);
