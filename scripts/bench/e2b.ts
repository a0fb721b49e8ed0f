// The E2B API (`hutch serve --e2b`, driven by the real `e2b` SDK) against the
// same work through hutch's own CLI, measured in the same run:
//   create   Sandbox.create() to the first commands.run("true") answer
//            vs `hutch box create B --start` then `hutch exec B -- true`
//   round    commands.run("true") on a running sandbox vs `hutch exec B -- true`
//
//   bun scripts/bench/e2b.ts [--json] [--rounds 20] [--creates 5]
//
// The SDK runs in a program of its own (this file with --sdk-worker) that
// trusts the server's certificate through NODE_EXTRA_CA_CERTS, as a user's
// does; its times are taken inside it, so its start-up is not counted. The
// CLI's are whole commands, each a process, as a user runs them. Goal: each
// SDK figure at most 1.5x the CLI's. E2B publishes ~150 ms for a create.
// Exit 0 when every run worked, goals met or not; 1 when a run broke.
import { openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { cpus, release } from "node:os";
import { HutchHome, describeFailure, log, requireHutch, runBench } from "./lib/env.ts";
import { median, met, num, percentile, table } from "./lib/stats.ts";

const GOAL_RATIO_MAX = 1.5;
const E2B_PUBLISHED_CREATE_MS = 150;

function flag(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : dflt;
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name}: a positive integer`);
  return v;
}

/** In the worker: the SDK's figures, as JSON on stdout. */
async function worker(rounds: number, creates: number): Promise<void> {
  const { Sandbox } = await import("e2b");
  const create: number[] = [];
  for (let i = 0; i < creates; i++) {
    const t0 = performance.now();
    const sb = await Sandbox.create();
    await sb.commands.run("true");
    create.push(performance.now() - t0);
    await sb.kill();
  }
  const sb = await Sandbox.create();
  const round: number[] = [];
  for (let i = 0; i < rounds + 3; i++) {
    const t0 = performance.now();
    await sb.commands.run("true");
    if (i >= 3) round.push(performance.now() - t0);
  }
  await sb.kill();
  console.log(JSON.stringify({ create, round }));
}

if (process.argv.includes("--sdk-worker")) {
  await worker(flag("rounds", 20), flag("creates", 5));
  process.exit(0);
}

const ROUNDS = flag("rounds", 20);
const CREATES = flag("creates", 5);
const JSON_OUT = process.argv.includes("--json");
requireHutch();
const server = new HutchHome();
let serving: ReturnType<typeof Bun.spawn> | undefined;

async function cleanup(): Promise<void> {
  log("cleaning up");
  await server.dispose();
  serving?.kill("SIGTERM");
  await serving?.exited;
}

const freePort = () => {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
};

async function timed(args: string[]): Promise<number> {
  const t0 = performance.now();
  const r = await server.hutch(args, { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(describeFailure(r, `hutch ${args.join(" ")}`));
  return performance.now() - t0;
}

async function main(): Promise<number> {
  const e2bPort = freePort();
  const logPath = join(server.dir, "serve.log");
  serving = Bun.spawn([server.bin, "serve", "--listen", `127.0.0.1:${freePort()}`, "--e2b", `127.0.0.1:${e2bPort}`], {
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
  const made = await server.hutch(["token", "create", "--user", "bench", "--json"]);
  if (made.code !== 0) throw new Error(describeFailure(made, "hutch token create"));
  const join64 = (JSON.parse(made.stdout) as { join: string }).join;
  const token = (JSON.parse(Buffer.from(join64, "base64url").toString()) as { token: string }).token;

  log(`CLI: ${CREATES} creates, ${ROUNDS} round trips`);
  const cliCreate: number[] = [];
  for (let i = 0; i < CREATES; i++) {
    const t = (await timed(["box", "create", `bench-c${i}`, "--start"])) + (await timed(["exec", `bench-c${i}`, "--", "true"]));
    cliCreate.push(t);
    await timed(["box", "delete", `bench-c${i}`]);
  }
  await timed(["box", "create", "bench-rt", "--start"]);
  const cliRound: number[] = [];
  for (let i = 0; i < ROUNDS + 3; i++) {
    const t = await timed(["exec", "bench-rt", "--", "true"]);
    if (i >= 3) cliRound.push(t);
  }
  await timed(["box", "delete", "bench-rt"]);

  log("SDK: the same, in a program of its own");
  const url = `https://127.0.0.1:${e2bPort}`;
  const w = Bun.spawn([process.execPath, import.meta.path, "--sdk-worker", "--rounds", String(ROUNDS), "--creates", String(CREATES)], {
    env: {
      ...process.env,
      E2B_API_KEY: token,
      E2B_API_URL: url,
      E2B_SANDBOX_URL: url,
      NODE_EXTRA_CA_CERTS: join(server.dir, "keys", "serve.crt"),
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(w.stdout).text(), new Response(w.stderr).text(), w.exited]);
  if (code !== 0) throw new Error(`the SDK worker exited ${code}: ${err.trim().split("\n").slice(-3).join(" | ")}`);
  const sdk = JSON.parse(out) as { create: number[]; round: number[] };

  const rows = [
    { name: "create to first run", sdk: sdk.create, cli: cliCreate },
    { name: "commands.run(true)", sdk: sdk.round, cli: cliRound },
  ].map((r) => {
    const ratio = median(r.sdk) / median(r.cli);
    return { ...r, ratio, met: ratio <= GOAL_RATIO_MAX };
  });
  const env = { cpus: cpus().length, kernel: release(), engine: "process" };
  if (JSON_OUT) {
    console.log(
      JSON.stringify({
        env,
        e2bPublishedCreateMs: E2B_PUBLISHED_CREATE_MS,
        goalRatioMax: GOAL_RATIO_MAX,
        results: rows.map((r) => ({
          name: r.name,
          sdkMedianMs: median(r.sdk),
          sdkP90Ms: percentile(r.sdk, 90),
          cliMedianMs: median(r.cli),
          cliP90Ms: percentile(r.cli, 90),
          ratio: r.ratio,
          met: r.met,
        })),
      }),
    );
  } else {
    console.log(
      `e2b SDK vs hutch CLI (${env.cpus} cpus, ${env.kernel}, process boxes; E2B publishes ~${E2B_PUBLISHED_CREATE_MS} ms create)`,
    );
    console.log(
      table(
        ["", "SDK median ms", "SDK p90", "CLI median ms", "CLI p90", "SDK/CLI", `goal <= ${GOAL_RATIO_MAX}`],
        rows.map((r) => [
          r.name,
          num(median(r.sdk), 1),
          num(percentile(r.sdk, 90), 1),
          num(median(r.cli), 1),
          num(percentile(r.cli, 90), 1),
          num(r.ratio, 2),
          met(r),
        ]),
      ),
    );
  }
  return 0;
}

await runBench(main, cleanup);
