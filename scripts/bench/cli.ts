// How fast the CLI starts, against peers measured in the same run:
//   start-up     `hutch --version` vs a compiled Bun program that prints one line
//   round trip   `hutch exec B -- true` vs `ssh … true`
//   request      `hutch box list` (a request verb: one GET, a table printed)
// Every row also runs a kept build of the last good commit (--baseline,
// default e3f517a: 0.040× ssh), each build with its own home and daemon, so a
// regression shows as a ratio between two builds on the same machine at the
// same moment, not as a figure to compare with an old README.
//
//   bun scripts/bench/cli.ts [--json] [--keep-ssh] [--rounds 50] [--hutch PATH] [--baseline COMMIT]
//
// --hutch measures another build of hutch (default dist/hutch). The baseline
// is built once (a detached git worktree at COMMIT, `bun install`, its own
// `bun run build` for this host) and kept in ~/.cache/hutch-bench/; later
// runs reuse it.
//
// The one-liner is compiled in this run with the flags scripts/build.ts uses,
// so both sides pay the same runtime start; the difference is what hutch
// evaluates before it answers. Exit 0 when every run worked, goals met or
// not; 1 when a run broke (a command failed, hung, or printed the wrong thing).
import { parseArgs } from "node:util";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { cpus, homedir, release, tmpdir } from "node:os";
import { join } from "node:path";
import { HutchHome, describeFailure, hutchBin, log, repoRoot, requireHutch, run, runBench, runsVerdict, sshPeer } from "./lib/env.ts";
import { median, percentile, round, table, met, num, okOf } from "./lib/stats.ts";
import { COMPILE } from "../compile.ts";

const GOAL_START_RATIO_MAX = 2;
const GOAL_RT_RATIO_MAX = 0.06;
const WARMUP_ROUNDS = 5;

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    "keep-ssh": { type: "boolean", default: false },
    rounds: { type: "string", default: "50" },
    hutch: { type: "string", default: hutchBin },
    baseline: { type: "string", default: "e3f517a" },
  },
});
const ROUNDS = Number(flags.rounds);
if (!Number.isSafeInteger(ROUNDS) || ROUNDS <= 0) {
  process.stderr.write(`bench: --rounds ${flags.rounds}: expected a positive integer\n`);
  process.exit(2);
}
if (!/^[0-9a-f]{7,40}$/.test(flags.baseline!)) {
  process.stderr.write(`bench: --baseline ${flags.baseline}: expected a commit id (7 to 40 hex digits)\n`);
  process.exit(2);
}

const BOX = "bench-cli";
const errors: string[] = [];

requireHutch(flags.hutch);
const home = new HutchHome(flags.hutch);
let baseHome: HutchHome | undefined;
const peerDir = mkdtempSync(join(tmpdir(), "hutch-bench-oneliner-"));
const oneLiner = join(peerDir, "one-liner");
let sshArgv: string[] | undefined;

async function cleanup(): Promise<void> {
  log("cleaning up");
  await home.dispose();
  await baseHome?.dispose();
  rmSync(peerDir, { recursive: true, force: true });
  if (sshArgv && !flags["keep-ssh"]) await sshPeer.stop();
}

/** The start-up peer: the smallest compiled Bun program, built as dist/hutch is. */
async function buildOneLiner(version: string): Promise<void> {
  const src = join(peerDir, "one-liner.ts");
  writeFileSync(src, `console.log(${JSON.stringify(version)});\n`);
  const r = await run([...COMPILE, src, "--outfile", oneLiner], { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(describeFailure(r, "bun build --compile (the one-liner)"));
}

/**
 * The kept build of `commit` for this host: from the cache, or built once in a
 * detached worktree with that commit's own install and build steps, then kept.
 */
async function baselineBuild(commit: string): Promise<string> {
  const cache = join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "hutch-bench");
  const kept = join(cache, `hutch-${commit}`);
  if (existsSync(kept)) return kept;
  mkdirSync(cache, { recursive: true });
  const tree = mkdtempSync(join(cache, `src-${commit}-`));
  const step = async (argv: string[], cwd: string, timeoutMs: number, env?: Record<string, string>) => {
    const r = await run(argv, { cwd, timeoutMs, env: { ...process.env, ...env } });
    if (r.code !== 0) throw new Error(describeFailure(r, `baseline ${commit}: ${argv.join(" ")}`));
  };
  log(`building the baseline ${commit} once (kept as ${kept})`);
  try {
    await step(["git", "worktree", "add", "--detach", tree, commit], repoRoot, 60_000);
    await step(["bun", "install", "--frozen-lockfile"], tree, 300_000);
    await step(["bun", "run", "build"], tree, 900_000, { HUTCH_BUILD_TARGETS: "host" });
    // Renamed into place whole: a run stopped half-way leaves no half-copied build to reuse.
    copyFileSync(join(tree, "dist", "hutch"), `${kept}.tmp`);
    renameSync(`${kept}.tmp`, kept);
  } finally {
    await run(["git", "worktree", "remove", "--force", tree], { cwd: repoRoot, timeoutMs: 60_000 });
    rmSync(tree, { recursive: true, force: true });
  }
  return kept;
}

type Side = [label: string, argv: string[], expect: string, env: Record<string, string | undefined>];
type Row = { name: string; sides: Side[] };

/** One run of argv: wall time in ms from spawn to exit, or null (and an error recorded) if it failed or printed the wrong thing. */
async function once(what: string, argv: string[], expect: string, env: Record<string, string | undefined>): Promise<number | null> {
  const r = await run(argv, { env, timeoutMs: 30_000 });
  if (r.code === 0 && r.stdout === expect) return r.ms;
  errors.push(r.code === 0 ? `${what}: printed ${JSON.stringify(r.stdout)}, expected ${JSON.stringify(expect)}` : describeFailure(r, what));
  return null;
}

interface Series {
  samples: number[];
  failed: number;
}

/** Runs every side of a row `count` times, interleaved, the first side moving one place each round. */
async function measure(row: Row, count: number): Promise<Series[]> {
  const out: Series[] = row.sides.map(() => ({ samples: [], failed: 0 }));
  const n = row.sides.length;
  for (let i = 0; i < count; i++) {
    for (let j = 0; j < n; j++) {
      const k = (i + j) % n;
      const [label, argv, expect, env] = row.sides[k]!;
      const v = await once(`${row.name} (${label})`, argv, expect, env);
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
  const base = await baselineBuild(flags.baseline!);
  baseHome = new HutchHome(base);
  log(`HUTCH_HOME=${home.dir} (this build), ${baseHome.dir} (${flags.baseline})`);
  const version = (await home.hutch(["--version"])).stdout;
  const baseVersion = (await baseHome.hutch(["--version"])).stdout;
  await buildOneLiner(version.trim());
  sshArgv = await sshPeer.start();
  log(`peer: ${sshArgv.join(" ")}`);
  await home.createBox(BOX);
  await baseHome.createBox(BOX);
  // What `box list` prints is the same table from both builds, but not byte for byte across versions: expect each its own.
  const list = (h: HutchHome) => h.hutch(["box", "list"]).then((r) => r.stdout);
  const [listing, baseListing] = [await list(home), await list(baseHome)];
  const b = flags.baseline!;
  const rows: Row[] = [
    {
      name: "start-up",
      sides: [
        ["hutch", [home.bin, "--version"], version, home.env],
        [b, [baseHome.bin, "--version"], baseVersion, baseHome.env],
        ["one-liner", [oneLiner], version, home.env],
      ],
    },
    {
      name: "round trip",
      sides: [
        ["hutch", [home.bin, "exec", BOX, "--", "true"], "", home.env],
        [b, [baseHome.bin, "exec", BOX, "--", "true"], "", baseHome.env],
        ["ssh", [...sshArgv, "true"], "", home.env],
      ],
    },
    {
      name: "box list",
      sides: [
        ["hutch", [home.bin, "box", "list"], listing, home.env],
        [b, [baseHome.bin, "box", "list"], baseListing, baseHome.env],
      ],
    },
  ];

  log(`warming up (${WARMUP_ROUNDS} of each)`);
  let warm = 0;
  for (const row of rows) warm += (await measure(row, WARMUP_ROUNDS)).reduce((n, s) => n + s.failed, 0);
  if (warm > 0) log(`warm-up: ${warm} failed run(s); measuring anyway`);
  const results: Series[][] = [];
  for (const row of rows) {
    log(`${row.name}: ${ROUNDS} each, interleaved`);
    results.push(await measure(row, ROUNDS));
  }
  const [[sh, sb, so], [rh, rb, rs], [lh, lb]] = results as [Series[], Series[], Series[]];
  const m = (s: Series | undefined) => median(s!.samples);
  const startRatio = m(sh) / m(so);
  const rtRatio = m(rh) / m(rs);
  const rtBaseRatio = m(rh) / m(rb);
  const listBaseRatio = m(lh) / m(lb);
  const report = {
    bench: "cli",
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "", kernel: release(), bun: Bun.version },
    hutch: { binary: home.binary, build: await home.buildId(), version: version.trim() },
    baseline: { commit: b, binary: baseHome.binary, build: await baseHome.buildId(), version: baseVersion.trim() },
    startUp: {
      command: "hutch --version",
      peer: "a compiled Bun program that prints one line (bun build --compile --minify --bytecode --format=esm)",
      rounds: ROUNDS,
      hutch: stats(sh!),
      baseline: stats(sb!),
      oneLiner: stats(so!),
      ratioMedian: round(startRatio, 3),
      baselineRatioMedian: round(m(sb) / m(so), 3),
      goal: { ratioMax: GOAL_START_RATIO_MAX, met: startRatio <= GOAL_START_RATIO_MAX },
    },
    roundTrip: {
      command: `hutch exec ${BOX} -- true`,
      peer: { argv: [...sshArgv, "true"], version: await sshPeer.version() },
      rounds: ROUNDS,
      hutch: stats(rh!),
      baseline: stats(rb!),
      ssh: stats(rs!),
      ratioMedian: round(rtRatio, 3),
      baselineRatioMedian: round(m(rb) / m(rs), 3),
      vsBaselineMedian: round(rtBaseRatio, 3),
      goal: { ratioMax: GOAL_RT_RATIO_MAX, vsBaselineMax: 1, met: rtRatio <= GOAL_RT_RATIO_MAX && rtBaseRatio <= 1 },
    },
    boxList: {
      command: "hutch box list",
      rounds: ROUNDS,
      hutch: stats(lh!),
      baseline: stats(lb!),
      vsBaselineMedian: round(listBaseRatio, 3),
      goal: { vsBaselineMax: 1, met: listBaseRatio <= 1 },
    },
    ok: errors.length === 0,
    errors,
  };

  if (flags.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    const row = (label: string, s: ReturnType<typeof stats>) => [label, okOf(s), num(s.medianMs, 2), num(s.p90Ms, 2)];
    const { startUp: u, roundTrip: r, boxList: l } = report;
    const head = ["", "ok", "median ms", "p90 ms"];
    const lines = [
      `hutch CLI start-up — ${report.date}, ${report.machine.cpus} cpus, hutch ${report.hutch.version} (build ${report.hutch.build}), baseline ${b} (build ${report.baseline.build}), Bun ${Bun.version}, ${r.peer.version}`,
      "",
      `start-up (\`hutch --version\` vs a compiled one-liner, ${ROUNDS} each, interleaved)`,
      table(head, [row("hutch", u.hutch), row(b, u.baseline), row("one-liner", u.oneLiner)]),
      `ratio hutch/one-liner (median): ${num(u.ratioMedian, 3)} (${b}: ${num(u.baselineRatioMedian, 3)})   goal ≤ ${GOAL_START_RATIO_MAX}: ${met(u.goal)}`,
      "",
      `round trip (\`exec ${BOX} -- true\` vs \`ssh … true\`, ${ROUNDS} each, interleaved)`,
      table(head, [row("hutch", r.hutch), row(b, r.baseline), row("ssh", r.ssh)]),
      `ratio hutch/ssh (median): ${num(r.ratioMedian, 3)} (${b}: ${num(r.baselineRatioMedian, 3)}); hutch/${b}: ${num(r.vsBaselineMedian, 3)}   goal ≤ ${GOAL_RT_RATIO_MAX} and ≤ 1: ${met(r.goal)}`,
      "",
      `request verb (\`box list\`, ${ROUNDS} each, interleaved)`,
      table(head, [row("hutch", l.hutch), row(b, l.baseline)]),
      `ratio hutch/${b} (median): ${num(l.vsBaselineMedian, 3)}   goal ≤ 1: ${met(l.goal)}`,
      "",
      runsVerdict(errors),
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  }
  return errors.length === 0 ? 0 : 1;
}

await runBench(main, cleanup);
