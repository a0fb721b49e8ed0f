// VM boxes asleep, against a cold boot of the same box, in the same run,
// under the same accelerator and image:
//   wake        an exec on an asleep box until its answer (the wake on demand),
//               against `box start` + the same exec on a stopped box (a cold boot)
//   sleep       `hutch box sleep` of a 1 GiB guest, idle, and after it touched
//               more memory (non-zero pages: zero pages cost nothing), per GiB touched
//   asleep      host processes, RSS and disk of the asleep box
//
//   bun scripts/bench/sleep.ts [--json] [--runs 3] [--accel tcg] [--touch-mib 256]
import { parseArgs } from "node:util";
import { statSync } from "node:fs";
import { join } from "node:path";
import { HutchHome, describeFailure, log, requireHutch } from "./lib/env.ts";
import { median, round, table } from "./lib/stats.ts";
import { qemuFor } from "../../tests/helpers.ts";

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    runs: { type: "string", default: "3" },
    accel: { type: "string" },
    "touch-mib": { type: "string", default: "256" },
  },
});
const RUNS = Number(flags.runs);
const TOUCH_MIB = Number(flags["touch-mib"]);
const GOALS = { wakeRatio: 0.1, sleepMs1GiB: 1000 };

requireHutch();
const home = new HutchHome();
if (flags.accel) home.env.HUTCH_QEMU_ACCEL = flags.accel;

async function must(args: string[], what: string): Promise<number> {
  const r = await home.hutch(args, { timeoutMs: 300_000 });
  if (r.code !== 0) throw new Error(describeFailure(r, what));
  return r.ms;
}

try {
  await home.useTestImage();
  log("creating a 1 GiB VM box (the accelerator is proven on first use)");
  await must(["box", "create", "slb", "--engine", "qemu", "--memory", "1G"], "box create");
  await must(["box", "start", "slb"], "box start");
  const info = JSON.parse((await home.hutch(["box", "info", "slb", "--json"])).stdout) as {
    id: string;
    engineInfo?: Record<string, string>;
  };
  const accel = info.engineInfo?.accel ?? "tcg";
  const state = join(home.dir, "boxes", info.id, "sleep.state");
  log(`accelerator: ${accel}`);

  const cold: number[] = [];
  const wake: number[] = [];
  const sleepIdle: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    // A cold boot to the first exec's answer.
    await must(["box", "stop", "slb"], "box stop");
    cold.push((await must(["box", "start", "slb"], "box start")) + (await must(["exec", "slb", "--", "true"], "exec")));
    await Bun.sleep(2000);
    sleepIdle.push(await must(["box", "sleep", "slb"], "box sleep"));
    // The wake on demand: the exec wakes the box.
    wake.push(await must(["exec", "slb", "--", "true"], "exec on an asleep box"));
  }
  await must(["box", "sleep", "slb"], "box sleep");
  const idleState = statSync(state).blocks * 512;
  const asleepProcs = qemuFor(info.id).length;
  await must(["exec", "slb", "--", "true"], "exec");

  log(`touching ${TOUCH_MIB} MiB of guest memory`);
  await must(["exec", "slb", "--", "sh", "-c", `yes hutch-bench | head -c ${TOUCH_MIB}M > /dev/shm/touched`], "touch memory");
  const touchedSleep = await must(["box", "sleep", "slb"], "box sleep (touched)");
  const touchedState = statSync(state).blocks * 512;

  const cb = median(cold);
  const wb = median(wake);
  const si = median(sleepIdle);
  const perGiB = ((touchedSleep - si) / TOUCH_MIB) * 1024;
  const result = {
    accel,
    runs: RUNS,
    wake: { wakeMs: round(wb, 0), coldMs: round(cb, 0), ratio: round(wb / cb, 3), goal: GOALS.wakeRatio, met: wb / cb <= GOALS.wakeRatio },
    sleep: {
      idle1GiBMs: round(si, 0),
      goalMs: GOALS.sleepMs1GiB,
      met: si <= GOALS.sleepMs1GiB,
      touchedMiB: TOUCH_MIB,
      touchedMs: round(touchedSleep, 0),
      perGiBTouchedMs: round(perGiB, 0),
    },
    asleep: {
      qemuProcesses: asleepProcs,
      hostRssMiB: 0,
      idleStateMiB: round(idleState / 1024 / 1024, 1),
      touchedStateMiB: round(touchedState / 1024 / 1024, 1),
    },
    runsMs: { cold: cold.map((x) => round(x, 0)), wake: wake.map((x) => round(x, 0)), sleepIdle: sleepIdle.map((x) => round(x, 0)) },
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    process.stdout.write(`VM boxes asleep under ${accel}, 1 GiB guest, ${RUNS} runs each\n\n`);
    process.stdout.write(
      `${table(
        ["measure", "hutch", "peer", "ratio", "goal"],
        [
          [
            "exec answer from asleep (ms, median)",
            String(result.wake.wakeMs),
            `${result.wake.coldMs} (cold boot + exec)`,
            String(result.wake.ratio),
            `≤ ${GOALS.wakeRatio} ${result.wake.met ? "met" : "MISSED"}`,
          ],
          [
            "sleep, 1 GiB guest idle (ms)",
            String(result.sleep.idle1GiBMs),
            "-",
            "-",
            `≤ ${GOALS.sleepMs1GiB} ${result.sleep.met ? "met" : "MISSED"}`,
          ],
          [`sleep after touching ${TOUCH_MIB} MiB (ms)`, String(result.sleep.touchedMs), "-", "-", "-"],
          ["sleep per GiB touched (ms)", String(result.sleep.perGiBTouchedMs), "-", "-", "-"],
          [
            "asleep: QEMU processes, host RSS",
            `${asleepProcs}, ${result.asleep.hostRssMiB} MiB`,
            "-",
            "-",
            `no process ${asleepProcs === 0 ? "met" : "MISSED"}`,
          ],
          [
            "asleep: disk (MiB)",
            `${result.asleep.idleStateMiB} idle, ${result.asleep.touchedStateMiB} after touching ${TOUCH_MIB} MiB`,
            "-",
            "-",
            "≤ RAM touched",
          ],
        ],
      )}\n`,
    );
    process.stdout.write(
      `\nruns (ms): cold ${result.runsMs.cold.join(" ")}; wake ${result.runsMs.wake.join(" ")}; sleep ${result.runsMs.sleepIdle.join(" ")}\n`,
    );
  }
} finally {
  await home.hutch(["box", "delete", "slb"], { timeoutMs: 120_000 }).catch(() => undefined);
  await home.dispose();
}
