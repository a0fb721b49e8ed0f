// Dispatch fan-out, against its peer measured in the same run:
//   fan-out      wall time of `hutch dispatch --from SNAP -k 4` (fork, a
//                claude turn against the fake model API, a snapshot, a
//                grading box, the check, the teardown, per worker, all at
//                once), against 4 sequential single runs of the same task
//                (`-k 1` four times), alternating. Goal: under 0.5x on a
//                machine with at least 4 cores; reported with the core count
//                wherever it runs.
//   fork         `hutch box create NAME --from SNAP --start` per worker
//                (median), the fork each worker pays.
//
//   bun scripts/bench/dispatch.ts [--json] [--runs 1] [--k 4]
// Needs the claude CLI installed (bash scripts/setup-tests, or dist/hutch agent install claude).
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { HutchHome, describeFailure, log, positiveInt, requireHutch, runBench } from "./lib/env.ts";
import { alternate, median, round, table } from "./lib/stats.ts";
import { startFakeModel } from "../../tests/fixtures/fake-model/index.ts";
import { fakeBindings } from "../../tests/agent-turns.ts";

const { values: flags } = parseArgs({
  options: { json: { type: "boolean", default: false }, runs: { type: "string", default: "1" }, k: { type: "string", default: "4" } },
});
const RUNS = positiveInt("runs", flags.runs);
const K = positiveInt("k", flags.k);
const GOAL = 0.5;
const TASK = "create answer.txt containing good";
const CHECK = "grep -qx good answer.txt";

requireHutch();
const home = new HutchHome();
home.env.HUTCH_AGENTS_DIR = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
const fake = await startFakeModel();

/** Wall ms of one dispatch of k workers; the winner's box (the only one left) is deleted after the clock stops. */
async function dispatch(snap: string, k: number): Promise<number> {
  const r = await home.hutch(["dispatch", "--from", snap, "-k", String(k), "--agent", "claude", "--check", CHECK, "--json", "--", TASK], {
    timeoutMs: 900_000,
  });
  if (r.code !== 0) throw new Error(describeFailure(r, `hutch dispatch -k ${k}`));
  const res = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { winner: string | null; workers: { status: string }[] };
  if (!res.winner || res.workers.some((w) => w.status !== "passed")) throw new Error(`dispatch -k ${k}: ${JSON.stringify(res.workers)}`);
  const del = await home.hutch(["box", "delete", res.winner], { timeoutMs: 60_000 });
  if (del.code !== 0) throw new Error(describeFailure(del, `hutch box delete ${res.winner}`));
  return r.ms;
}

await runBench(
  async () => {
    writeFileSync(join(home.dir, "config.json"), JSON.stringify({ bindings: { anthropic: fakeBindings(fake).bindings.anthropic } }));
    const set = Bun.spawnSync([home.bin, "secret", "set", "anthropic"], { env: home.env, stdin: new TextEncoder().encode("sk-ant-bench") });
    if (set.exitCode !== 0) throw new Error(`secret set failed: ${set.stderr}`);
    const inst = await home.hutch(["agent", "install", "claude"], { timeoutMs: 600_000 });
    if (inst.code !== 0) throw new Error(describeFailure(inst, "hutch agent install claude"));
    await home.createBox("src");
    const seed = await home.hutch(["exec", "src", "--", "sh", "-c", "echo bad > /workspace/answer.txt"], { timeoutMs: 30_000 });
    if (seed.code !== 0) throw new Error(describeFailure(seed, "seeding src"));
    const s = await home.hutch(["snapshot", "create", "src", "--json"], { timeoutMs: 120_000 });
    if (s.code !== 0) throw new Error(describeFailure(s, "hutch snapshot create src"));
    const snap = (JSON.parse(s.stdout.trim().split("\n").at(-1)!) as { value: { snapshot: { id: string } } }).value.snapshot.id;

    log(`fork: ${K} boxes from ${snap}`);
    const forkMs: number[] = [];
    for (let i = 0; i < K; i++) {
      const r = await home.hutch(["box", "create", `fork${i}`, "--from", snap, "--start"], { timeoutMs: 120_000 });
      if (r.code !== 0) throw new Error(describeFailure(r, `hutch box create fork${i} --from ${snap}`));
      forkMs.push(r.ms);
      await home.hutch(["box", "delete", `fork${i}`], { timeoutMs: 60_000 });
    }

    log(`warm-up: one dispatch -k 1; then ${RUNS} round(s) of -k ${K} against ${K} sequential -k 1, alternating`);
    await dispatch(snap, 1);
    const fan: number[] = [];
    const seq: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      for (const side of alternate(["fan", "seq"] as const, i)) {
        if (side === "fan") fan.push(await dispatch(snap, K));
        else {
          let total = 0;
          for (let j = 0; j < K; j++) total += await dispatch(snap, 1);
          seq.push(total);
        }
      }
    }
    const ratio = round(median(fan) / median(seq), 2);
    const cores = availableParallelism();
    const result = {
      cores,
      k: K,
      fanOutMs: round(median(fan), 0),
      sequentialMs: round(median(seq), 0),
      ratio,
      goal: GOAL,
      goalApplies: cores >= 4,
      met: ratio < GOAL,
      forkMsPerWorker: round(median(forkMs), 0),
      samples: { fan: fan.map((x) => round(x, 0)), seq: seq.map((x) => round(x, 0)), fork: forkMs.map((x) => round(x, 0)) },
    };
    if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else
      process.stdout.write(
        `${table(
          ["measure", "hutch", "peer", "hutch/peer", "goal"],
          [
            [
              `dispatch -k ${K}, claude (ms, median)`,
              String(result.fanOutMs),
              `${result.sequentialMs} (${K} sequential -k 1)`,
              String(ratio),
              `< ${GOAL}x on ≥ 4 cores; ${cores} cores here: ${result.met ? "met" : cores >= 4 ? "MISSED" : "reported"}`,
            ],
            ["fork: box create --from --start (ms, median)", String(result.forkMsPerWorker), "-", "-", "reported"],
          ],
        )}\n`,
      );
    return 0;
  },
  async () => {
    await home.dispose();
    await fake.stop();
  },
);
