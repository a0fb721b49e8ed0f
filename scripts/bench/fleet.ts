// The fleet plane (issue 30), each figure against a peer measured in the same run:
//   claim       a warm pool of VM boxes (asleep, booted ahead): `box create
//               --image default` claiming one, to the answer of its first
//               `exec -- true`, against a cold `box create --start` of the
//               same image and limits and the same exec (the peer)
//   forward     in a 3-server fleet on a 3-node nats-server cluster (loopback,
//               started here): `hutch exec B -- true` through a server that
//               does not run B (forwarded to the one that does), against the
//               same through the server that runs it (the peer); interleaved
//   failover    a server SIGKILLed with a `--restart always` box: until an
//               exec of it through a live server answers, with the file its
//               checkpoint kept, against the node heartbeat's expiry (15 s)
//
//   bun scripts/bench/fleet.ts [--json] [--claims 3] [--rounds 100] [--accel tcg]
//        [--memory 1G] [--no-claim] [--no-forward]
//
// Exit 0 when every run worked, goals met or not; 1 when a run broke.
import { parseArgs } from "node:util";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { describeFailure, HutchHome, hutchBin, log, positiveInt, requireHutch, run, runBench, runsVerdict } from "./lib/env.ts";
import { alternate, median, met, percentile, round, table } from "./lib/stats.ts";

const { values: f } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    claims: { type: "string", default: "3" },
    rounds: { type: "string", default: "100" },
    accel: { type: "string", default: "tcg" },
    memory: { type: "string", default: "1G" },
    "no-claim": { type: "boolean", default: false },
    "no-forward": { type: "boolean", default: false },
  },
});
const CLAIMS = positiveInt("claims", f.claims!);
const ROUNDS = positiveInt("rounds", f.rounds!);
const WARM = 2;
const WARMUP_ROUNDS = 3;
const GOALS = { claimRatio: 0.1, forwardRatio: 1.5 };
/** A VM's boot under tcg takes a minute or more; a pool of two boots one after the other. */
const BOOT_TIMEOUT_MS = 600_000;

requireHutch();
const homes: HutchHome[] = [];
let nats: NatsCluster | undefined;
const errors: string[] = [];

async function cleanup(): Promise<void> {
  log("cleaning up");
  for (const h of homes) {
    if (h === poolHome) await clearPool(h);
    await h.dispose();
  }
  await nats?.stop();
}

/** The home that keeps a pool, if one was made. */
let poolHome: HutchHome | undefined;

/**
 * Clears the pool and waits until its boxes are gone: a boot under way when
 * the pool is cleared finishes and is then thrown away, and a VM left
 * booting when the daemon stops would outlive it.
 */
async function clearPool(h: HutchHome): Promise<void> {
  await h.hutch(["pool", "clear", "default"], { timeoutMs: 60_000 }).catch(() => undefined);
  const boxes = join(h.dir, "boxes");
  const left = () => (existsSync(boxes) ? readdirSync(boxes).length : 0);
  const deadline = Date.now() + BOOT_TIMEOUT_MS;
  while (left() > 0 && Date.now() < deadline) {
    // Anything listed is a user's box the bench made: dispose deletes those.
    const listed = await h.hutch(["box", "list", "--json"], { timeoutMs: 30_000 });
    if (listed.code === 0 && (JSON.parse(listed.stdout) as unknown[]).length >= left()) return;
    await Bun.sleep(500);
  }
  if (left() > 0) log(`cleanup: the pool's boxes were not all gone after ${BOOT_TIMEOUT_MS / 1000} s`);
}

async function must(home: HutchHome, args: string[], what: string, timeoutMs = BOOT_TIMEOUT_MS): Promise<number> {
  const r = await home.hutch(args, { timeoutMs });
  if (r.code !== 0) throw new Error(describeFailure(r, what));
  return r.ms;
}

async function until(what: string, ok: () => Promise<boolean>, timeoutMs = BOOT_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(250);
  }
}

// ---- (a) a claim from a warm pool against a cold create ----

interface ClaimResult {
  accel: string;
  memory: string;
  claims: number;
  claimMs: number;
  coldMs: number;
  ratio: number;
  goal: number;
  met: boolean;
  runsMs: { claim: number[]; cold: number[] };
}

async function claim(): Promise<ClaimResult> {
  const home = new HutchHome();
  homes.push(home);
  poolHome = home;
  home.env.HUTCH_QEMU_ACCEL = f.accel;
  await home.useTestImage();
  const limits = ["--memory", f.memory!];
  const ready = async () => {
    const r = await home.hutch(["pool", "list", "--json"], { timeoutMs: 30_000 });
    return r.code === 0 ? ((JSON.parse(r.stdout) as { ready: number }[])[0]?.ready ?? 0) : 0;
  };
  // The peer first, with no pool yet: nothing boots beside it.
  const cold: number[] = [];
  for (let i = 0; i < CLAIMS; i++) {
    const name = `cold-${i}`;
    log(`cold: box create ${name} --image default --start, then exec -- true`);
    const ms =
      (await must(home, ["box", "create", name, "--image", "default", "--start", ...limits], "cold box create")) +
      (await must(home, ["exec", name, "--", "true"], "exec (cold)", 60_000));
    cold.push(ms);
    await must(home, ["box", "delete", name], "box delete", 120_000);
  }
  log(`pool set default --warm ${WARM}: booting ${WARM} boxes, one at a time`);
  await must(home, ["pool", "set", "default", "--warm", String(WARM), ...limits], "pool set");
  const claims: number[] = [];
  for (let i = 0; i < CLAIMS; i++) {
    // Each claim starts from a full pool with no boot under way: the refill of the one before is done.
    await until(`the pool to hold ${WARM}`, async () => (await ready()) === WARM);
    const name = `claim-${i}`;
    log(`claim: box create ${name} --image default, then exec -- true`);
    const ms =
      (await must(home, ["box", "create", name, "--image", "default", ...limits], "box create (claim)")) +
      (await must(home, ["exec", name, "--", "true"], "exec (claimed)", 60_000));
    claims.push(ms);
    const cmdline = (await home.hutch(["exec", name, "--", "cat", "/proc/cmdline"])).stdout;
    if (!cmdline.includes("hutch.box=pool-")) errors.push(`box ${name} was not claimed from the pool (booted as: ${cmdline.trim()})`);
    await must(home, ["box", "delete", name], "box delete", 120_000);
  }
  const c = median(claims);
  const k = median(cold);
  return {
    accel: f.accel!,
    memory: f.memory!,
    claims: CLAIMS,
    claimMs: round(c, 0),
    coldMs: round(k, 0),
    ratio: round(c / k, 3),
    goal: GOALS.claimRatio,
    met: c / k <= GOALS.claimRatio,
    runsMs: { claim: claims.map((x) => round(x, 0)), cold: cold.map((x) => round(x, 0)) },
  };
}

// ---- (b) exec forwarded by another server of the fleet against exec on the box's own ----

interface ForwardResult {
  rounds: number;
  nats: string;
  here: { p50: number; p90: number; failed: number };
  forwarded: { p50: number; p90: number; failed: number };
  ratio: number;
  goal: number;
  met: boolean;
}

interface Fleet {
  urls: string;
  servers: Record<"a" | "b" | "c", HutchHome>;
}

/** Three servers (a made the fleet; b and c have its key) on a fresh 3-node cluster. */
async function startFleet(): Promise<Fleet> {
  log("starting a 3-node nats-server cluster on loopback");
  nats = await startNatsCluster(3);
  const urls = nats.urls.join(",");
  const servers = {} as Fleet["servers"];
  for (const node of ["a", "b", "c"] as const) {
    const h = new HutchHome();
    homes.push(h);
    if (node === "a") {
      const init = await run([h.bin, "cluster", "init", "--cluster", urls], { env: h.env, timeoutMs: 60_000 });
      if (init.code !== 0) throw new Error(describeFailure(init, "hutch cluster init"));
    } else {
      mkdirSync(join(h.dir, "keys"), { recursive: true, mode: 0o700 });
      copyFileSync(join(servers.a.dir, "keys", "fleet.key"), join(h.dir, "keys", "fleet.key"));
      chmodSync(join(h.dir, "keys", "fleet.key"), 0o600);
    }
    log(`starting fleet server ${node}`);
    await h.serve(["--cluster", urls, "--node", node]);
    servers[node] = h;
  }
  return { urls, servers };
}

async function forward(fleet: Fleet): Promise<ForwardResult> {
  const { a, b } = fleet.servers;
  const box = "bench-forward";
  await must(a, ["box", "create", box, "--node", "a", "--start"], "box create --node a", 120_000);
  // b learns of the box through the fleet's directory.
  await until("server b to list the box", async () => (await b.hutch(["box", "list", "--json"])).stdout.includes(box), 30_000);
  type Side = "here" | "forwarded";
  const through: Record<Side, HutchHome> = { here: a, forwarded: b };
  const once = async (side: Side): Promise<number | null> => {
    const r = await run([through[side].bin, "exec", box, "--", "true"], { env: through[side].env, stdout: "ignore", timeoutMs: 30_000 });
    if (r.code === 0) return r.ms;
    errors.push(describeFailure(r, `exec through ${side === "here" ? "a (the box's server)" : "b (forwarded to a)"}`));
    return null;
  };
  for (let i = 0; i < WARMUP_ROUNDS; i++) for (const side of ["here", "forwarded"] as const) await once(side);
  const samples: Record<Side, number[]> = { here: [], forwarded: [] };
  const failed: Record<Side, number> = { here: 0, forwarded: 0 };
  for (let i = 0; i < ROUNDS; i++) {
    for (const side of alternate(["here", "forwarded"] as const, i)) {
      const ms = await once(side);
      if (ms === null) failed[side]++;
      else samples[side].push(ms);
    }
  }
  const stat = (s: Side) => ({ p50: round(median(samples[s]), 1), p90: round(percentile(samples[s], 90), 1), failed: failed[s] });
  const ratio = median(samples.forwarded) / median(samples.here);
  return {
    rounds: ROUNDS,
    nats: (await run(["nats-server", "--version"])).stdout.trim(),
    here: stat("here"),
    forwarded: stat("forwarded"),
    ratio: round(ratio, 3),
    goal: GOALS.forwardRatio,
    met: ratio <= GOALS.forwardRatio,
  };
}

// ---- (c) FAILOVER ----
//
// A server of the fleet dies (SIGKILL, and its box's processes with it, as a
// machine that goes down) while it runs a `--restart always` box with a
// checkpoint: the time until an exec of that box through a live server
// answers again. The peer is the node heartbeat's expiry (nodes.ts, 15 s):
// the least any failover driven by it can take, so the ratio is what the
// lease, placement, the restore and the exec add on top of noticing.
const NODE_TTL_MS = 15_000;
interface FailoverResult {
  ms: number;
  ttlMs: number;
  ratio: number;
}
async function failover(fleet: Fleet): Promise<FailoverResult | null> {
  const { a, c } = fleet.servers;
  const box = "bench-failover";
  await must(
    a,
    ["box", "create", box, "--node", "c", "--start", "--restart", "always", "--checkpoint-every", "10s"],
    "box create --node c",
    120_000,
  );
  await must(a, ["exec", box, "--", "sh", "-c", "echo kept > /workspace/kept.txt"], "exec", 60_000);
  const wrote = Date.now();
  await until(
    "a checkpoint of the box",
    async () => {
      const r = await a.hutch(["box", "info", box, "--json"]);
      const info = JSON.parse(r.stdout || "{}") as { checkpoint?: { last?: { at: string } } };
      return info.checkpoint?.last !== undefined && Date.parse(info.checkpoint.last.at) > wrote;
    },
    120_000,
  );
  const id = (JSON.parse((await a.hutch(["box", "info", box, "--json"])).stdout) as { id: string }).id;
  log("killing server c and its box");
  const pid = c.servePid;
  if (pid === undefined) throw new Error("server c is not running");
  process.kill(pid, "SIGKILL");
  for (const p of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    try {
      if ((await Bun.file(`/proc/${p}/environ`).text()).includes(`HUTCH_BOX_ID=${id}\0`)) process.kill(Number(p), "SIGKILL");
    } catch {
      // gone, or not ours
    }
  }
  const t0 = performance.now();
  await until(
    "the box to answer through a",
    async () => {
      const r = await run([a.bin, "exec", box, "--", "cat", "/workspace/kept.txt"], { env: a.env, timeoutMs: 10_000 });
      return r.code === 0 && r.stdout.trim() === "kept";
    },
    180_000,
  );
  const ms = Math.round(performance.now() - t0);
  return { ms, ttlMs: NODE_TTL_MS, ratio: round(ms / NODE_TTL_MS, 2) };
}

async function main(): Promise<number> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(hutchBin).stream()) hasher.update(chunk);
  const build = hasher.digest("hex").slice(0, 16);
  const claimed = f["no-claim"] ? null : await claim();
  let forwarded: ForwardResult | null = null;
  let failed: FailoverResult | null = null;
  if (!f["no-forward"]) {
    const fleet = await startFleet();
    forwarded = await forward(fleet);
    failed = await failover(fleet);
  }
  const result = { build, cpus: cpus().length, claim: claimed, forward: forwarded, failover: failed, errors };
  if (f.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    const rows: string[][] = [];
    if (claimed)
      rows.push([
        `claim from a warm pool of ${WARM}, to the first exec's answer (ms, median of ${claimed.claims})`,
        String(claimed.claimMs),
        `${claimed.coldMs} (cold create --start + exec)`,
        String(claimed.ratio),
        `≤ ${GOALS.claimRatio} ${met(claimed)}`,
      ]);
    if (forwarded)
      rows.push([
        `exec -- true through another server of the fleet (ms, median of ${forwarded.rounds})`,
        String(forwarded.forwarded.p50),
        `${forwarded.here.p50} (through the box's own server)`,
        String(forwarded.ratio),
        `≤ ${GOALS.forwardRatio} ${met(forwarded)}`,
      ]);
    if (failed)
      rows.push([
        "failover: a SIGKILLed server's restart-always box answering through another (ms)",
        String(failed.ms),
        `${failed.ttlMs} (the node heartbeat's expiry)`,
        String(failed.ratio),
        "-",
      ]);
    process.stdout.write(`the fleet plane, build ${build}, ${cpus().length} CPUs\n\n`);
    process.stdout.write(`${table(["measure", "hutch", "peer", "ratio", "goal"], rows)}\n`);
    if (claimed)
      process.stdout.write(
        `\nclaim runs (ms, ${claimed.accel}, ${claimed.memory} VMs): claim ${claimed.runsMs.claim.join(" ")}; cold ${claimed.runsMs.cold.join(" ")}\n`,
      );
    if (forwarded)
      process.stdout.write(
        `exec p90 (ms): forwarded ${forwarded.forwarded.p90}, here ${forwarded.here.p90}; failed: ${forwarded.forwarded.failed} + ${forwarded.here.failed}; ${forwarded.nats}\n`,
      );
    process.stdout.write(`${runsVerdict(errors)}\n`);
  }
  return errors.length === 0 ? 0 : 1;
}

await runBench(main, cleanup);
