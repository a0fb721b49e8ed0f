// The snapshot store against restic, on the same generated tree in the same
// run: first snapshot, no-change snapshot, one-file-change snapshot, full
// restore, list on a store holding 50 snapshots; stored bytes; peak RSS of
// each step (GNU time's maximum resident set), and CPU seconds (user + system,
// every thread) as a second view that a loaded machine distorts less. Each hutch step runs the store
// (host/src/snapshot, what the daemon runs) in a process of its own, as
// restic runs in one, so both RSS figures are one process's. Goals (issue):
// at most 0.8x restic's time on each step, at most 1x its bytes and RSS.
//
//   bun scripts/bench/snapshot.ts [--json] [--small N] [--large-mib N]
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
import { log, repoRoot, run, describeFailure } from "./lib/env.ts";

const args = process.argv.slice(2);

if (args[0] === "--worker") {
  // One store operation in this process: save TREE | restore SNAP DEST | list.
  const { openStore, restoreTree, snapshotTree, storeLocation } = await import(join(repoRoot, "host/src/snapshot/index.ts"));
  const [, op, home, a, b] = args;
  const store = await openStore(storeLocation(home!), { create: true });
  if (op === "save") {
    const r = await snapshotTree(store, a!);
    process.stdout.write(`${JSON.stringify({ id: r.id, stats: r.stats })}\n`);
  } else if (op === "restore") {
    const r = await restoreTree(store, a!, b!, { symlinks: "any" });
    process.stdout.write(`${JSON.stringify(r)}\n`);
  } else if (op === "list") {
    const all = await store.listSnapshots();
    process.stdout.write(`${JSON.stringify({ snapshots: all.length })}\n`);
  }
  store.close();
  process.exit(0);
}

const json = args.includes("--json");
const flag = (name: string, dflt: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const SMALL = flag("--small", 20_000);
const LARGE_MIB = flag("--large-mib", 300);
const MiB = 1024 * 1024;

function restic(): string {
  const r = Bun.spawnSync(["restic", "version"]);
  if (r.exitCode !== 0) {
    log("restic is missing: apt-get install -y restic");
    process.exit(1);
  }
  return r.stdout.toString().trim();
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
  const rssFile = join(work, "rss");
  const r = await run(["/usr/bin/time", "-f", "%M %U %S", "-o", rssFile, ...argv], { env, timeoutMs: 30 * 60_000 });
  if (r.code !== 0) {
    log(describeFailure(r, what));
    process.exit(1);
  }
  const [rss, user, sys] = readFileSync(rssFile, "utf8").trim().split("\n").at(-1)!.split(" ").map(Number);
  return { ms: r.ms, rssKiB: rss!, cpuS: user! + sys!, stdout: r.stdout };
}

const work = mkdtempSync(join(tmpdir(), "hutch-bench-snap-"));
const tree = join(work, "tree");
const small = join(work, "small");
const hutchHome = join(work, "hutch-home");
const repo = join(work, "restic-repo");
const env = { ...process.env, RESTIC_PASSWORD: "hutch-bench", RESTIC_CACHE_DIR: join(work, "restic-cache"), RESTIC_PROGRESS_FPS: "0.1" };
const bun = process.execPath;
const self = import.meta.path;
const hutch = (...rest: string[]) => [bun, self, "--worker", rest[0]!, hutchHome, ...rest.slice(1)];
const resticArgv = (...rest: string[]) => ["restic", "-r", repo, "--quiet", ...rest];
let loadBefore: number[] = [];

try {
  const version = restic();
  loadBefore = loadavg().map((x) => +x.toFixed(2));
  log(`generating ${SMALL} small files and ${LARGE_MIB} MiB of large files in ${tree}`);
  mkdirSync(tree);
  const made = makeTree(tree);
  mkdirSync(small);
  writeFileSync(join(small, "note.txt"), "a small tree for the 50-snapshot store\n");
  const want = digest(tree);
  await timed(resticArgv("init"), env, "restic init");

  const rows: { step: string; hutch: Step; restic: Step }[] = [];
  const both = async (step: string, h: string[], r: string[]) => {
    log(step);
    const a = await timed(h, env, `hutch ${step}`);
    const b = await timed(r, env, `restic ${step}`);
    rows.push({ step, hutch: a, restic: b });
  };

  await both("first snapshot", hutch("save", tree), resticArgv("backup", tree));
  await both("no-change snapshot", hutch("save", tree), resticArgv("backup", tree));
  const changed = smallFile(tree, Math.floor(SMALL / 3));
  appendFileSync(changed, text(1024, prng(7)));
  await both("one-file-change snapshot", hutch("save", tree), resticArgv("backup", tree));
  const storedHutch = duBytes(join(hutchHome, "snapshots"));
  const storedRestic = duBytes(repo);

  const lastHutch = JSON.parse(rows.at(-1)!.hutch.stdout.trim()).id as string;
  const outH = join(work, "restore-hutch");
  const outR = join(work, "restore-restic");
  await both("full restore", hutch("restore", lastHutch, outH), resticArgv("restore", "latest", "--target", outR));
  const after = digest(tree);
  if (digest(outH) !== after) throw new Error("hutch restored different bytes");
  // restic restores under the absolute path of what it backed up.
  if (digest(join(outR, tree)) !== after) throw new Error("restic restored different bytes");
  if (after === want) throw new Error("the one-file change did not change the tree");
  rmSync(outH, { recursive: true, force: true });
  rmSync(outR, { recursive: true, force: true });

  log("filling both stores to 50 snapshots (a small tree)");
  for (let i = 3; i < 50; i++) {
    writeFileSync(join(small, "note.txt"), `snapshot ${i}\n`);
    await timed(hutch("save", small), env, "hutch fill");
    await timed(resticArgv("backup", small), env, "restic fill");
  }
  await both("list (50 snapshots)", hutch("list"), resticArgv("snapshots", "--json"));
  const listed = JSON.parse(rows.at(-1)!.hutch.stdout).snapshots;
  if (listed !== 50) throw new Error(`hutch listed ${listed} snapshots, not 50`);

  const report = {
    tree: { files: made.files, bytes: made.bytes },
    restic: version,
    cores: navigator.hardwareConcurrency,
    loadAverage: { before: loadBefore, after: loadavg().map((x) => +x.toFixed(2)) },
    steps: rows.map((r) => ({
      step: r.step,
      hutchMs: Math.round(r.hutch.ms),
      resticMs: Math.round(r.restic.ms),
      timeRatio: +(r.hutch.ms / r.restic.ms).toFixed(2),
      hutchCpuS: +r.hutch.cpuS.toFixed(2),
      resticCpuS: +r.restic.cpuS.toFixed(2),
      cpuRatio: +(r.hutch.cpuS / Math.max(r.restic.cpuS, 0.01)).toFixed(2),
      hutchRssMiB: +(r.hutch.rssKiB / 1024).toFixed(1),
      resticRssMiB: +(r.restic.rssKiB / 1024).toFixed(1),
      rssRatio: +(r.hutch.rssKiB / r.restic.rssKiB).toFixed(2),
    })),
    stored: { hutchBytes: storedHutch, resticBytes: storedRestic, ratio: +(storedHutch / storedRestic).toFixed(3) },
  };
  if (json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    process.stdout.write(
      `tree: ${made.files} files, ${(made.bytes / MiB).toFixed(0)} MiB; ${version}; ${report.cores} cores; load average ${loadBefore.join(" ")} before, ${report.loadAverage.after.join(" ")} after\n\n`,
    );
    process.stdout.write(
      "step                       hutch ms  restic ms  time x  hutch RSS  restic RSS  RSS x  hutch cpu s  restic cpu s  cpu x\n",
    );
    for (const s of report.steps) {
      process.stdout.write(
        `${s.step.padEnd(26)} ${String(s.hutchMs).padStart(8)}  ${String(s.resticMs).padStart(9)}  ${s.timeRatio.toFixed(2).padStart(6)}  ${s.hutchRssMiB.toFixed(1).padStart(7)} M  ${s.resticRssMiB.toFixed(1).padStart(8)} M  ${s.rssRatio.toFixed(2).padStart(5)}  ${s.hutchCpuS.toFixed(2).padStart(11)}  ${s.resticCpuS.toFixed(2).padStart(12)}  ${s.cpuRatio.toFixed(2).padStart(5)}\n`,
      );
    }
    process.stdout.write(
      `\nstored after three snapshots: hutch ${(storedHutch / MiB).toFixed(1)} MiB, restic ${(storedRestic / MiB).toFixed(1)} MiB, ${report.stored.ratio.toFixed(3)}x\n`,
    );
    process.stdout.write("goals: time x <= 0.80, RSS x <= 1.00, stored x <= 1.00\n");
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
