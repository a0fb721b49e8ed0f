// The snapshot store against restic, on the same generated tree in the same
// run: first snapshot, no-change snapshot, one-file-change snapshot, full
// restore, list on a store holding 50 snapshots; stored bytes; peak RSS of
// each step (GNU time's maximum resident set), and CPU seconds (user + system,
// every thread) as a second view that a loaded machine distorts less. Each
// hutch step runs the store (host/src/snapshot, what the daemon runs) in a
// process of its own, as restic runs in one, so both RSS figures are one
// process's: snapshot-op.ts, compiled as hutch ships (scripts/compile.ts). Goals (issue):
// at most 0.8x restic's time on each step, at most 1x its bytes and RSS.
//
//   bun scripts/bench/snapshot.ts [--json] [--runs N] [--small N] [--large-mib N] [--here]
//
// --runs (default 3) rounds of the four save and restore steps, each round
// into fresh stores and with the side that goes first alternating; each
// figure is the median of its rounds, and the spread of the time ratio is
// printed beside it. One round is at the mercy of this machine's disk: a full
// restore alone ranged 2.5–12.7 s for either side.
//
// The restic repository is made with the repository format and compression
// restic uses by default (0.14: format 2, compression auto). Its password is
// a fixed bench value in RESTIC_PASSWORD; scrypt runs on every restic
// command, as it does for restic's users.
import { createHash } from "node:crypto";
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
  appendFileSync,
} from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { HOST_COMPILE, HOST_WORKERS } from "../compile.ts";
import { log, repoRoot, run, describeFailure } from "./lib/env.ts";
import { alternate, median } from "./lib/stats.ts";

const args = process.argv.slice(2);

const json = args.includes("--json");
const flag = (name: string, dflt: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const SMALL = flag("--small", 20_000);
const RUNS = flag("--runs", 3);
const LARGE_MIB = flag("--large-mib", 300);
const MiB = 1024 * 1024;

/** restic's version; installs Debian's package first when it is missing and this runs as root (as ssh-peer.sh does sshd). */
function restic(): string {
  if (Bun.which("restic") === null && process.getuid?.() === 0) {
    log("installing restic (Debian's package) to measure against");
    const apt = Bun.spawnSync(["apt-get", "install", "-y", "-qq", "restic"], {
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
      stdout: "ignore",
      stderr: "inherit",
    });
    if (apt.exitCode !== 0) log("apt-get install restic failed; try apt-get update first");
  }
  if (Bun.which("restic") === null) {
    log("restic is missing: apt-get install -y restic (the bench measures hutch against it)");
    process.exit(1);
  }
  return Bun.spawnSync(["restic", "version"]).stdout.toString().trim();
}

function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

const WORDS = [
  "const",
  "let",
  "return",
  "import",
  "function",
  "export",
  "class",
  "the",
  "of",
  "and",
  "value",
  "index",
  "await",
  "if",
  "else",
  "=>",
];
function text(n: number, next: () => number): string {
  let s = "";
  while (s.length < n) s += WORDS[next() % WORDS.length] + (next() % 9 === 0 ? "\n" : " ");
  return s.slice(0, n);
}

function smallFile(root: string, i: number): string {
  return join(root, "src", `pkg${Math.floor(i / 200) % 20}`, `mod${i % 200}`, `file${i}.ts`);
}

/** 20k source-like files in 200 directories, a random binary and a compressible log, totalling LARGE_MIB for the two. */
function makeTree(root: string): { files: number; bytes: number } {
  const next = prng(42);
  let bytes = 0;
  const dirs = 200;
  for (let i = 0; i < SMALL; i++) {
    const file = smallFile(root, i);
    if (i < dirs * 20) mkdirSync(join(file, ".."), { recursive: true });
    const body = text(200 + (next() % 3800), next);
    writeFileSync(file, body);
    bytes += body.length;
  }
  const randomMiB = Math.ceil((LARGE_MIB * 2) / 3);
  const fd = openSync(join(root, "data.bin"), "w");
  const buf = new Uint8Array(MiB);
  const words = new Uint32Array(buf.buffer);
  for (let m = 0; m < randomMiB; m++) {
    for (let i = 0; i < words.length; i++) words[i] = next();
    writeSync(fd, buf);
  }
  closeSync(fd);
  const logFd = openSync(join(root, "build.log"), "w");
  for (let m = 0; m < LARGE_MIB - randomMiB; m++) writeSync(logFd, text(MiB, next));
  closeSync(logFd);
  bytes += LARGE_MIB * MiB;
  return { files: SMALL + 2, bytes };
}

function duBytes(dir: string): number {
  let n = 0;
  for (const f of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const st = statSync(join(dir, f));
    if (st.isFile()) n += st.blocks * 512;
  }
  return n;
}

function digest(root: string): string {
  const h = createHash("sha256");
  let files = 0;
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const p = rel ? `${rel}/${name}` : name;
      const st = statSync(join(root, p));
      if (st.isDirectory()) walk(p);
      else {
        files++;
        h.update(p).update(readFileSync(join(root, p)));
      }
    }
  };
  walk("");
  return `${files}:${h.digest("hex")}`;
}

interface Step {
  ms: number;
  rssKiB: number;
  /** User plus system CPU seconds (GNU time), every thread of the process. */
  cpuS: number;
  stdout: string;
}

async function timed(argv: string[], env: Record<string, string | undefined>, what: string): Promise<Step> {
  // Dirty pages of the step before (a store's packs, a restored tree) are written back first, untimed, so
  // neither side's step pays for the other's writeback.
  Bun.spawnSync(["sync"]);
  const rssFile = join(work, "rss");
  const r = await run(["/usr/bin/time", "-f", "%M %U %S", "-o", rssFile, ...argv], { env, timeoutMs: 30 * 60_000 });
  if (r.code !== 0) {
    log(describeFailure(r, what));
    process.exit(1);
  }
  const [rss, user, sys] = readFileSync(rssFile, "utf8").trim().split("\n").at(-1)!.split(" ").map(Number);
  return { ms: r.ms, rssKiB: rss!, cpuS: user! + sys!, stdout: r.stdout };
}

const scratch = mkdtempSync(join(tmpdir(), "hutch-bench-snap-"));
/**
 * Where the tree, the stores and the restores live: a fresh ext4 in a loop
 * file when run as root (--here: the scratch directory itself). On a file
 * system that has been busy for hours, creating the restore's 20k inodes cost
 * 1-18 s of kernel time from one run to the next, for either side alike,
 * which drowned both tools' own work.
 */
function workDir(): { dir: string; unmount?: () => void } {
  if (args.includes("--here") || process.getuid?.() !== 0 || Bun.which("mkfs.ext4") === null) return { dir: scratch };
  const image = join(scratch, "fs.img");
  const dir = join(scratch, "fs");
  mkdirSync(dir);
  const sh = (argv: string[]) => {
    const r = Bun.spawnSync(argv, { stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`${argv.join(" ")}: ${r.stderr.toString().trim()}`);
  };
  sh(["truncate", "-s", "6G", image]);
  sh(["mkfs.ext4", "-q", "-F", image]);
  sh(["mount", "-o", "loop", image, dir]);
  log(`working on a fresh ext4 at ${dir} (--here to work in ${scratch})`);
  return { dir, unmount: () => sh(["umount", dir]) };
}
const fs = workDir();
const work = fs.dir;
const tree = join(work, "tree");
const small = join(work, "small");
const env = { ...process.env, RESTIC_PASSWORD: "hutch-bench", RESTIC_CACHE_DIR: join(work, "restic-cache"), RESTIC_PROGRESS_FPS: "0.1" };
const op = join(scratch, "snapshot-op");
let loadBefore: number[] = [];

type Side = "hutch" | "restic";
/** One round's stores: each round starts from nothing. */
function stores(round: number) {
  const hutchHome = join(work, `hutch-home-${round}`);
  const repo = join(work, `restic-repo-${round}`);
  return {
    hutchHome,
    repo,
    hutch: (...rest: string[]) => [op, rest[0]!, hutchHome, ...rest.slice(1)],
    restic: (...rest: string[]) => ["restic", "-r", repo, "--quiet", ...rest],
  };
}

const STEPS = ["first snapshot", "no-change snapshot", "one-file-change snapshot", "full restore", "list (50 snapshots)"] as const;
type StepName = (typeof STEPS)[number];

/** snapshot-op.ts as a binary built like dist/hutch: the store's code as it ships. */
async function buildOp(): Promise<void> {
  log("compiling scripts/bench/snapshot-op.ts as dist/hutch is compiled");
  const argv = [...HOST_COMPILE, "scripts/bench/snapshot-op.ts", ...HOST_WORKERS, "--outfile", op];
  const r = await run(argv, { cwd: repoRoot });
  if (r.code !== 0) {
    log(describeFailure(r, "compiling snapshot-op"));
    process.exit(1);
  }
}

try {
  const version = restic();
  await buildOp();
  loadBefore = loadavg().map((x) => +x.toFixed(2));
  log(`generating ${SMALL} small files and ${LARGE_MIB} MiB of large files in ${tree}`);
  mkdirSync(tree);
  const made = makeTree(tree);
  mkdirSync(small);
  writeFileSync(join(small, "note.txt"), "a small tree for the 50-snapshot store\n");
  const want = digest(tree);
  const changed = smallFile(tree, Math.floor(SMALL / 3));
  const original = readFileSync(changed);

  const samples = new Map<StepName, Record<Side, Step[]>>(STEPS.map((st) => [st, { hutch: [], restic: [] }]));
  const both = async (step: StepName, order: Side[], argv: Record<Side, string[]>) => {
    log(`${step} (${order.join(" first, then ")})`);
    for (const side of order) samples.get(step)![side].push(await timed(argv[side], env, `${side} ${step}`));
  };
  let stored = { hutch: 0, restic: 0 };
  let last = stores(0);
  for (let round = 0; round < RUNS; round++) {
    const st = stores(round);
    last = st;
    const order = alternate<Side>(["hutch", "restic"], round);
    writeFileSync(changed, original);
    await timed(st.restic("init"), env, "restic init");
    log(`round ${round + 1} of ${RUNS}`);
    await both("first snapshot", order, { hutch: st.hutch("save", tree), restic: st.restic("backup", tree) });
    await both("no-change snapshot", order, { hutch: st.hutch("save", tree), restic: st.restic("backup", tree) });
    appendFileSync(changed, text(1024, prng(7)));
    await both("one-file-change snapshot", order, { hutch: st.hutch("save", tree), restic: st.restic("backup", tree) });
    stored = { hutch: duBytes(join(st.hutchHome, "snapshots")), restic: duBytes(st.repo) };

    const lastHutch = JSON.parse(samples.get("one-file-change snapshot")!.hutch.at(-1)!.stdout.trim()).id as string;
    const outH = join(work, "restore-hutch");
    const outR = join(work, "restore-restic");
    await both("full restore", order, {
      hutch: st.hutch("restore", lastHutch, outH),
      restic: st.restic("restore", "latest", "--target", outR),
    });
    const after = digest(tree);
    if (digest(outH) !== after) throw new Error("hutch restored different bytes");
    // restic restores under the absolute path of what it backed up.
    if (digest(join(outR, tree)) !== after) throw new Error("restic restored different bytes");
    if (after === want) throw new Error("the one-file change did not change the tree");
    rmSync(outH, { recursive: true, force: true });
    rmSync(outR, { recursive: true, force: true });
    if (round < RUNS - 1) {
      rmSync(st.hutchHome, { recursive: true, force: true });
      rmSync(st.repo, { recursive: true, force: true });
    }
  }

  log("filling both stores to 50 snapshots (a small tree)");
  for (let i = 3; i < 50; i++) {
    writeFileSync(join(small, "note.txt"), `snapshot ${i}\n`);
    await timed(last.hutch("save", small), env, "hutch fill");
    await timed(last.restic("backup", small), env, "restic fill");
  }
  for (let round = 0; round < RUNS; round++)
    await both("list (50 snapshots)", alternate<Side>(["hutch", "restic"], round), {
      hutch: last.hutch("list"),
      restic: last.restic("snapshots", "--json"),
    });
  const listed = JSON.parse(samples.get("list (50 snapshots)")!.hutch.at(-1)!.stdout).snapshots;
  if (listed !== 50) throw new Error(`hutch listed ${listed} snapshots, not 50`);

  const med = (xs: Step[], f: (s: Step) => number) => median(xs.map(f));
  const report = {
    tree: { files: made.files, bytes: made.bytes },
    restic: version,
    cores: navigator.hardwareConcurrency,
    runs: RUNS,
    loadAverage: { before: loadBefore, after: loadavg().map((x) => +x.toFixed(2)) },
    steps: STEPS.map((step) => {
      const { hutch: h, restic: r } = samples.get(step)!;
      const ratios = h.map((x, i) => x.ms / r[i]!.ms);
      return {
        step,
        hutchMs: Math.round(med(h, (x) => x.ms)),
        resticMs: Math.round(med(r, (x) => x.ms)),
        timeRatio: +(med(h, (x) => x.ms) / med(r, (x) => x.ms)).toFixed(2),
        timeRatioRange: [+Math.min(...ratios).toFixed(2), +Math.max(...ratios).toFixed(2)],
        hutchCpuS: +med(h, (x) => x.cpuS).toFixed(2),
        resticCpuS: +med(r, (x) => x.cpuS).toFixed(2),
        cpuRatio: +(
          med(h, (x) => x.cpuS) /
          Math.max(
            med(r, (x) => x.cpuS),
            0.01,
          )
        ).toFixed(2),
        hutchRssMiB: +(med(h, (x) => x.rssKiB) / 1024).toFixed(1),
        resticRssMiB: +(med(r, (x) => x.rssKiB) / 1024).toFixed(1),
        rssRatio: +(med(h, (x) => x.rssKiB) / med(r, (x) => x.rssKiB)).toFixed(2),
        samples: {
          hutchMs: h.map((x) => Math.round(x.ms)),
          resticMs: r.map((x) => Math.round(x.ms)),
          hutchRssKiB: h.map((x) => x.rssKiB),
          resticRssKiB: r.map((x) => x.rssKiB),
        },
      };
    }),
    stored: { hutchBytes: stored.hutch, resticBytes: stored.restic, ratio: +(stored.hutch / stored.restic).toFixed(3) },
  };
  if (json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    process.stdout.write(
      `tree: ${made.files} files, ${(made.bytes / MiB).toFixed(0)} MiB; ${version}; ${report.cores} cores; ${RUNS} rounds (medians); load average ${loadBefore.join(" ")} before, ${report.loadAverage.after.join(" ")} after\n\n`,
    );
    process.stdout.write(
      "step                       hutch ms  restic ms  time x  (rounds)    hutch RSS  restic RSS  RSS x  hutch cpu s  restic cpu s  cpu x\n",
    );
    for (const s of report.steps) {
      const range = `${s.timeRatioRange[0]!.toFixed(2)}-${s.timeRatioRange[1]!.toFixed(2)}`;
      process.stdout.write(
        `${s.step.padEnd(26)} ${String(s.hutchMs).padStart(8)}  ${String(s.resticMs).padStart(9)}  ${s.timeRatio.toFixed(2).padStart(6)}  ${range.padEnd(10)}  ${s.hutchRssMiB.toFixed(1).padStart(7)} M  ${s.resticRssMiB.toFixed(1).padStart(8)} M  ${s.rssRatio.toFixed(2).padStart(5)}  ${s.hutchCpuS.toFixed(2).padStart(11)}  ${s.resticCpuS.toFixed(2).padStart(12)}  ${s.cpuRatio.toFixed(2).padStart(5)}\n`,
      );
    }
    process.stdout.write(
      `\nstored after three snapshots: hutch ${(stored.hutch / MiB).toFixed(1)} MiB, restic ${(stored.restic / MiB).toFixed(1)} MiB, ${report.stored.ratio.toFixed(3)}x\n`,
    );
    process.stdout.write("goals: time x <= 0.80, RSS x <= 1.00, stored x <= 1.00\n");
  }
} finally {
  // A loop file system goes with its image.
  fs.unmount?.();
  rmSync(scratch, { recursive: true, force: true });
}
