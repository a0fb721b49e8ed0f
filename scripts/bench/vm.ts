// VM boxes against a bare boot of the same kernel, in the same run, under the
// same accelerator:
//   boot        `hutch box start` until the guest agent answers, against QEMU
//               booting the image's kernel and initramfs with busybox as init
//               until busybox prints its banner (the bare boot-to-init)
//   guest RSS   hutch-guest's resident memory as PID 1, idle (anonymous and
//               file-backed: the binary's pages come from the read-only guest disk)
//   host RSS    the QEMU process of an idle box
//
//   bun scripts/bench/vm.ts [--json] [--runs 3] [--accel tcg]
import { parseArgs } from "node:util";
import { readFileSync } from "node:fs";
import { probeAccel } from "../../host/src/engine/qemu/accel.ts";
import type { Accel } from "../../host/src/engine/qemu/args.ts";
import { join } from "node:path";
import { HutchHome, describeFailure, log, requireHutch } from "./lib/env.ts";
import { median, round, table } from "./lib/stats.ts";

const { values: flags } = parseArgs({
  options: { json: { type: "boolean", default: false }, runs: { type: "string", default: "3" }, accel: { type: "string" } },
});
const RUNS = Number(flags.runs);
const GOALS = { bootRatio: 1.3, guestRssMiB: 40 };

requireHutch();
const home = new HutchHome();
if (flags.accel) home.env.HUTCH_QEMU_ACCEL = flags.accel;

function kib(status: string, field: string): number {
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN);
}

/** The bare peer: the same kernel and initramfs, busybox as init, timed to its banner (hutch's accelerator probe). */
async function bareBoot(accel: string): Promise<number> {
  const p = await probeAccel(home.dir, accel as Accel, "x86_64", 120_000, { cpus: 2, memoryMiB: 1024 });
  if (!p.ok) throw new Error(`the bare boot did not reach init: ${p.detail}`);
  return p.ms;
}

try {
  await home.useTestImage();

  log("creating the box (the accelerator is proven on first use)");
  const c = await home.hutch(["box", "create", "vmb", "--engine", "qemu"], { timeoutMs: 120_000 });
  if (c.code !== 0) throw new Error(describeFailure(c, "box create"));
  const first = await home.hutch(["box", "start", "vmb"], { timeoutMs: 300_000 });
  if (first.code !== 0) throw new Error(describeFailure(first, "box start"));
  const info = JSON.parse((await home.hutch(["box", "info", "vmb", "--json"])).stdout) as {
    id: string;
    engineInfo?: Record<string, string>;
  };
  const accel = info.engineInfo?.accel ?? "tcg";
  log(`accelerator: ${accel} (${info.engineInfo?.["accel reason"] ?? ""})`);
  if ((await home.hutch(["box", "stop", "vmb"], { timeoutMs: 120_000 })).code !== 0) throw new Error("box stop failed");

  const hutchBoot: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const order = i % 2 === 0 ? ["hutch", "bare"] : ["bare", "hutch"];
    for (const side of order) {
      if (side === "bare") bare.push(await bareBoot(accel));
      else {
        const r = await home.hutch(["box", "start", "vmb"], { timeoutMs: 300_000 });
        if (r.code !== 0) throw new Error(describeFailure(r, "box start"));
        hutchBoot.push(r.ms);
        await home.hutch(["box", "stop", "vmb"], { timeoutMs: 120_000 });
      }
    }
  }
  // Idle memory, read from a box started once more and left to settle.
  if ((await home.hutch(["box", "start", "vmb"], { timeoutMs: 300_000 })).code !== 0) throw new Error("box start failed");
  await Bun.sleep(3000);
  const status = (await home.hutch(["exec", "vmb", "--", "cat", "/proc/1/status"])).stdout;
  const guest = { rss: kib(status, "VmRSS") / 1024, anon: kib(status, "RssAnon") / 1024, file: kib(status, "RssFile") / 1024 };
  const qemuPid = Number(JSON.parse(readFileSync(join(home.dir, "boxes", info.id, "box.pid"), "utf8")).pid);
  const qemuStatus = readFileSync(`/proc/${qemuPid}/status`, "utf8");
  // File pages are the kernel, initramfs and (DAX) guest disk mapped from the
  // host's page cache: one copy for every box on the host. Anonymous pages are
  // this VM's own (its RAM as the guest touched it, and QEMU's heap).
  const host = { rss: kib(qemuStatus, "VmRSS") / 1024, anon: kib(qemuStatus, "RssAnon") / 1024, file: kib(qemuStatus, "RssFile") / 1024 };

  const hb = median(hutchBoot);
  const bb = median(bare);
  const result = {
    accel,
    runs: RUNS,
    boot: {
      hutchMs: round(hb, 0),
      bareMs: round(bb, 0),
      ratio: round(hb / bb, 2),
      goal: GOALS.bootRatio,
      met: hb / bb <= GOALS.bootRatio,
      hutchRuns: hutchBoot.map((x) => round(x, 0)),
      bareRuns: bare.map((x) => round(x, 0)),
    },
    guestRss: {
      totalMiB: round(guest.rss, 1),
      anonMiB: round(guest.anon, 1),
      fileMiB: round(guest.file, 1),
      goalMiB: GOALS.guestRssMiB,
      met: guest.rss <= GOALS.guestRssMiB,
    },
    hostRssPerIdleVm: { totalMiB: round(host.rss, 1), anonMiB: round(host.anon, 1), fileMiB: round(host.file, 1) },
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    process.stdout.write(`VM boxes under ${accel}, ${RUNS} boots each, interleaved\n\n`);
    process.stdout.write(
      `${table(
        ["measure", "hutch", "peer", "ratio", "goal"],
        [
          [
            "boot to ready (ms, median)",
            String(result.boot.hutchMs),
            `${result.boot.bareMs} (bare busybox init)`,
            String(result.boot.ratio),
            `≤ ${GOALS.bootRatio} ${result.boot.met ? "met" : "MISSED"}`,
          ],
          [
            "guest RSS idle (MiB)",
            `${result.guestRss.totalMiB} (anon ${result.guestRss.anonMiB}, file ${result.guestRss.fileMiB})`,
            "-",
            "-",
            `≤ ${GOALS.guestRssMiB} ${result.guestRss.met ? "met" : "MISSED"}`,
          ],
          [
            "host RSS per idle VM (MiB)",
            `${result.hostRssPerIdleVm.totalMiB} (anon ${result.hostRssPerIdleVm.anonMiB}, file ${result.hostRssPerIdleVm.fileMiB})`,
            "-",
            "-",
            "-",
          ],
        ],
      )}\n`,
    );
    // The machine may be shared: the single boots show how much the median can be trusted.
    process.stdout.write(`\nboots (ms): hutch ${result.boot.hutchRuns.join(" ")}; bare ${result.boot.bareRuns.join(" ")}\n`);
  }
} finally {
  await home.hutch(["box", "delete", "vmb"], { timeoutMs: 120_000 }).catch(() => undefined);
  await home.dispose();
}
