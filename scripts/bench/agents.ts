// Coding agents in boxes, against peers measured in the same run:
//   first delta   time from `hutch run --agent claude --prompt` to the first
//                 message.delta event in the log, against the same Claude Code
//                 run directly on the host (same pinned CLI, same fake model
//                 API, same flags) to its first text delta on stdout.
//                 Goal: at most 1.5x.
//   mapping       events per second the harness mappers make from a recorded
//                 stream cycled to 10,000 records, against JSON.parse alone
//                 over the same lines (the floor any mapper pays).
//   VM rows       (--vm, on by default) the first delta in a QEMU box against
//                 the host's, reported (under tcg no goal applies); and
//                 `hutch box start` of a VM with the agent CLI disks against one
//                 without (a home whose cache is empty), alternating. Goal:
//                 within 5 % of each other.
//
//   bun scripts/bench/agents.ts [--json] [--runs 5] [--no-vm] [--accel tcg]
// Needs the agent CLIs installed (bash scripts/setup-tests, or dist/hutch agent install).
import { parseArgs } from "node:util";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HutchHome, describeFailure, log, repoRoot, requireHutch } from "./lib/env.ts";
import { median, round, table } from "./lib/stats.ts";
import { HARNESSES } from "../../host/src/harness/index.ts";
import { startFakeModel } from "../../tests/fixtures/fake-model/index.ts";
import { fakeBindings } from "../../tests/agent-turns.ts";
import { startOnHost } from "../../tests/fixtures/agents/host-run.ts";

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    runs: { type: "string", default: "5" },
    vm: { type: "boolean", default: true },
    accel: { type: "string" },
  },
  allowNegative: true,
});
const RUNS = Number(flags.runs);
const RECORDS = 10_000;
const GOAL_RATIO = 1.5;
const GOAL_BOOT_RATIO = 1.05;
const PROMPT = "create hello.txt containing hi";
const AGENTS_DIR = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";

requireHutch();

/** ms from spawning `hutch run --prompt` to the first message.delta in the session log. */
async function hutchFirstDelta(home: HutchHome, box = "ag"): Promise<number> {
  const t0 = performance.now();
  const r = await home.hutch(["run", box, "--agent", "claude", "--prompt", PROMPT, "--detach", "--json"], { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(describeFailure(r, "hutch run --agent claude --prompt"));
  const id = (JSON.parse(r.stdout) as { id: string }).id;
  const ms = await new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${join(home.dir, "hutch.sock")}:/v1/sessions/${id}/subscribe?from=1`);
    const timer = setTimeout(() => reject(new Error(`no message.delta in session ${id} within 120 s`)), 120_000);
    ws.onmessage = (e) => {
      if (String(e.data).includes('"kind":"message.delta"')) {
        clearTimeout(timer);
        resolve(performance.now() - t0);
        ws.close();
      }
    };
  });
  // Let the turn end before the next one starts in the same box.
  const w = await home.hutch(["session", "wait", id], { timeoutMs: 120_000 });
  if (w.code !== 0) throw new Error(describeFailure(w, `hutch session wait ${id}`));
  return ms;
}

/** ms from spawning the CLI on the host to its first text delta on stdout. */
async function hostFirstDelta(fake: Awaited<ReturnType<typeof startFakeModel>>): Promise<number> {
  const t0 = performance.now();
  const run = startOnHost(HARNESSES.claude, fake, PROMPT);
  const reader = run.proc.stdout.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let ms = -1;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    if (ms < 0 && buf.includes('"text_delta"')) ms = performance.now() - t0;
  }
  const code = await run.proc.exited;
  if (code !== 0 || ms < 0) throw new Error(`claude on the host exited ${code} without a text delta`);
  return ms;
}

function mappingRate(name: "claude" | "codex" | "opencode" | "pi") {
  const recorded = readFileSync(join(repoRoot, "tests", "fixtures", "agents", `${name}.ndjson`), "utf8")
    .trim()
    .split("\n");
  const lines = Array.from({ length: RECORDS }, (_, i) => recorded[i % recorded.length]!);
  const t0 = performance.now();
  let parsed = 0;
  for (const l of lines) parsed += JSON.parse(l) ? 1 : 0;
  const parseMs = performance.now() - t0;
  const t1 = performance.now();
  const m = HARNESSES[name].mapper();
  let events = 0;
  for (const l of lines) events += m.line(l).length;
  const mapMs = performance.now() - t1;
  if (parsed !== RECORDS) throw new Error("parse floor broke");
  return {
    agent: name,
    records: RECORDS,
    events,
    eventsPerS: round(events / (mapMs / 1000), 0),
    recordsPerS: round(RECORDS / (mapMs / 1000), 0),
    parseRecordsPerS: round(RECORDS / (parseMs / 1000), 0),
    ratioToParse: round(mapMs / parseMs, 2),
  };
}

/** Wall ms of `hutch box start` of a stopped VM box (until its guest answers), then stops it again. */
async function vmBoot(h: HutchHome, box: string): Promise<number> {
  const t0 = performance.now();
  const r = await h.hutch(["box", "start", box], { timeoutMs: 300_000 });
  const ms = performance.now() - t0;
  if (r.code !== 0) throw new Error(describeFailure(r, `hutch box start ${box}`));
  const s = await h.hutch(["box", "stop", box], { timeoutMs: 120_000 });
  if (s.code !== 0) throw new Error(describeFailure(s, `hutch box stop ${box}`));
  return ms;
}

const home = new HutchHome();
home.env.HUTCH_AGENTS_DIR = AGENTS_DIR;
if (flags.accel) home.env.HUTCH_QEMU_ACCEL = flags.accel;
const fake = await startFakeModel();
try {
  writeFileSync(
    join(home.dir, "config.json"),
    JSON.stringify({
      bindings: { anthropic: fakeBindings(fake).bindings.anthropic },
    }),
  );
  const set = Bun.spawnSync([home.bin, "secret", "set", "anthropic"], {
    env: home.env,
    stdin: new TextEncoder().encode("sk-ant-bench-secret"),
  });
  if (set.exitCode !== 0) throw new Error(`secret set failed: ${set.stderr}`);
  log("installing claude if needed and starting a box");
  const inst = await home.hutch(["agent", "install", "claude"], { timeoutMs: 600_000 });
  if (inst.code !== 0) throw new Error(describeFailure(inst, "hutch agent install claude"));
  const box = await home.hutch(["box", "create", "ag", "--start", "--secret", "anthropic"], { timeoutMs: 60_000 });
  if (box.code !== 0) throw new Error(describeFailure(box, "hutch box create ag"));

  log(`first delta: ${RUNS} runs each, alternating hutch and the host (plus one warm-up each)`);
  await hutchFirstDelta(home);
  await hostFirstDelta(fake);
  const hutchMs: number[] = [];
  const hostMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    hutchMs.push(await hutchFirstDelta(home));
    hostMs.push(await hostFirstDelta(fake));
  }
  const h = median(hutchMs);
  const p = median(hostMs);

  log(`mapping: ${RECORDS} records per agent`);
  const mapping = (["claude", "codex", "opencode", "pi"] as const).map(mappingRate);

  let vm: {
    accel: string;
    firstDelta: { hutchMs: number; hostMs: number; ratio: number; samples: { hutch: number[]; host: number[] } };
    boot: {
      withDisksMs: number;
      withoutMs: number;
      ratio: number;
      goal: number;
      met: boolean;
      samples: { with: number[]; without: number[] };
    };
  } | null = null;
  if (flags.vm) {
    log("VM rows: the image, and a QEMU box with the agent disks");
    await home.useTestImage();
    const c = await home.hutch(["box", "create", "agvm", "--engine", "qemu", "--memory", "2G", "--secret", "anthropic", "--start"], {
      timeoutMs: 600_000,
    });
    if (c.code !== 0) throw new Error(describeFailure(c, "hutch box create agvm --engine qemu"));
    const accel =
      (JSON.parse((await home.hutch(["box", "info", "agvm", "--json"])).stdout) as { engineInfo?: Record<string, string> }).engineInfo
        ?.accel ?? "?";
    log(`VM first delta (${accel}): ${RUNS} runs each, alternating with the host`);
    await hutchFirstDelta(home, "agvm");
    const vmMs: number[] = [];
    const vmHostMs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      vmMs.push(await hutchFirstDelta(home, "agvm"));
      vmHostMs.push(await hostFirstDelta(fake));
    }
    if ((await home.hutch(["box", "stop", "agvm"], { timeoutMs: 120_000 })).code !== 0) throw new Error("box stop agvm failed");
    log("VM boot with the agent disks against without (a home with an empty agent cache)");
    const bare = new HutchHome();
    const emptyCache = mkdtempSync(join(tmpdir(), "hutch-bench-no-agents-"));
    Object.assign(bare.env, { HUTCH_AGENTS_DIR: emptyCache, ...(flags.accel ? { HUTCH_QEMU_ACCEL: flags.accel } : {}) });
    try {
      await bare.useTestImage();
      const b = await bare.hutch(["box", "create", "nod", "--engine", "qemu", "--memory", "2G"], { timeoutMs: 120_000 });
      if (b.code !== 0) throw new Error(describeFailure(b, "hutch box create nod"));
      await vmBoot(bare, "nod");
      await vmBoot(home, "agvm");
      const withDisks: number[] = [];
      const without: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        if (i % 2 === 0) {
          withDisks.push(await vmBoot(home, "agvm"));
          without.push(await vmBoot(bare, "nod"));
        } else {
          without.push(await vmBoot(bare, "nod"));
          withDisks.push(await vmBoot(home, "agvm"));
        }
      }
      await bare.hutch(["box", "delete", "nod"], { timeoutMs: 60_000 });
      const w = median(withDisks);
      const o = median(without);
      vm = {
        accel,
        firstDelta: {
          hutchMs: round(median(vmMs), 0),
          hostMs: round(median(vmHostMs), 0),
          ratio: round(median(vmMs) / median(vmHostMs), 2),
          samples: { hutch: vmMs.map((x) => round(x, 0)), host: vmHostMs.map((x) => round(x, 0)) },
        },
        boot: {
          withDisksMs: round(w, 0),
          withoutMs: round(o, 0),
          ratio: round(w / o, 3),
          goal: GOAL_BOOT_RATIO,
          met: w / o <= GOAL_BOOT_RATIO,
          samples: { with: withDisks.map((x) => round(x, 0)), without: without.map((x) => round(x, 0)) },
        },
      };
    } finally {
      await bare.dispose();
      rmSync(emptyCache, { recursive: true, force: true });
    }
    await home.hutch(["box", "delete", "agvm"], { timeoutMs: 60_000 });
  }

  const result = {
    cli: `${HARNESSES.claude.npm!.name}@${HARNESSES.claude.npm!.version}`,
    build: await home.buildId(),
    firstDelta: {
      hutchMs: round(h, 0),
      hostMs: round(p, 0),
      ratio: round(h / p, 2),
      goal: GOAL_RATIO,
      met: h / p <= GOAL_RATIO,
      samples: { hutch: hutchMs.map((x) => round(x, 0)), host: hostMs.map((x) => round(x, 0)) },
    },
    mapping,
    vm,
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    process.stdout.write(
      table(
        ["measure", "hutch", "peer", "hutch/peer", "goal"],
        [
          [
            "first message.delta, claude (ms, median)",
            String(result.firstDelta.hutchMs),
            `${result.firstDelta.hostMs} (on the host)`,
            String(result.firstDelta.ratio),
            `≤ ${GOAL_RATIO}x ${result.firstDelta.met ? "met" : "MISSED"}`,
          ],
          ...mapping.map((m) => [
            `mapping ${m.agent}: events/s (records/s)`,
            `${m.eventsPerS} (${m.recordsPerS})`,
            `${m.parseRecordsPerS} records/s (JSON.parse)`,
            String(m.ratioToParse),
            "-",
          ]),
          ...(vm
            ? [
                [
                  `first message.delta, claude in a VM, ${vm.accel} (ms, median)`,
                  String(vm.firstDelta.hutchMs),
                  `${vm.firstDelta.hostMs} (on the host)`,
                  String(vm.firstDelta.ratio),
                  "reported (no goal under tcg)",
                ],
                [
                  "VM box start with the agent disks (ms, median)",
                  String(vm.boot.withDisksMs),
                  `${vm.boot.withoutMs} (without)`,
                  String(vm.boot.ratio),
                  `≤ ${GOAL_BOOT_RATIO}x ${vm.boot.met ? "met" : "MISSED"}`,
                ],
              ]
            : []),
        ],
      ),
    );
  }
  await home.hutch(["box", "delete", "ag"], { timeoutMs: 30_000 });
} finally {
  await home.dispose();
  await fake.stop();
}
