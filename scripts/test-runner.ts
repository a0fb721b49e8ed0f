// Runs the test files side by side: each file in its own `bun test` process,
// several at once (HUTCH_TEST_JOBS, default the cores + 1: most of a file's
// time is waiting on a box, a VM or a daemon, not on a core), the longest
// first so the last ones to finish are short. Files that boot VMs run one or
// two at a time (HUTCH_TEST_VM_JOBS, the most, default 2): a VM under tcg
// keeps its vCPUs busy, so the runner gives the VM files a second slot only
// while they are the run's longest chain, balancing the time the VM files
// and the others still need (tests/durations.json) so both end together;
// once only VM files are left, they have every slot they may take. What
// files need made first (the VM images they boot, the VS Code tools, the
// agent CLIs: PREREQS) is made once, beside the files that need none, and
// each file starts once its own are in. Each file's output is printed whole when it ends; the end
// repeats every failure with its error, the slowest files, and the line
// "N passed, N failed".
//
// Files run apart from each other as they already do in one process: each
// makes its own home, daemon and boxes (tests/helpers.ts makeHome). A file
// that cannot share the machine says so with a line `// test: alone` and
// runs with nothing else; a file that boots VMs without the test images
// (tests/helpers.ts testImage) says `// test: vm`.
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, relative } from "node:path";

const ROOT = join(import.meta.dir, "..");
const DURATIONS = join(ROOT, "tests", "durations.json");
const ROOTS = ["shared/test", "host/test", "guest/test", "extension/test", "tests"];
const TIMEOUT_MS = "60000";
/** How long the longest VM file may keep the VM slot while its image is prepared. */
const HOLD_MS = 30_000;

interface Result {
  file: string;
  code: number;
  seconds: number;
  pass: number;
  fail: number;
  skip: number;
  output: string;
}

function testFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === "node_modules") continue;
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".test.ts")) out.push(relative(ROOT, path));
    }
  };
  for (const r of ROOTS) walk(join(ROOT, r));
  return out.sort();
}

const source = (file: string) => readFileSync(join(ROOT, file), "utf8");

/**
 * An image's step: under the lock scripts/test's early build of it holds
 * (scripts/prepare-images), so the step waits for that build and finds the
 * image made, rather than making it a second time beside it.
 */
function prepareImage(profile: "base" | "desktop"): string[] {
  const cache = process.env.HUTCH_TEST_IMAGE_HOME ?? "/var/tmp/hutch-test-images";
  mkdirSync(cache, { recursive: true });
  return ["flock", join(cache, `.${profile}.lock`), "bun", join("tests", "prepare-image.ts"), profile];
}

/**
 * What a file needs made before it starts, each made once per run beside the
 * first files: the VM images it boots (tests/helpers.ts testImage,
 * installTestImage), the VS Code rig's tools (tests/vscode-rig.ts), the agent
 * CLIs' shared cache (tests/agent-turns.ts, or a file naming the cache). Each
 * chain runs its steps one after another (two image builds at once would
 * only share the cores); the chains run side by side.
 */
const PREREQS = {
  base: { chain: "images", cmd: prepareImage("base"), uses: /installTestImage\(|testImage\(\)/ },
  desktop: { chain: "images", cmd: prepareImage("desktop"), uses: /testImage\("desktop"\)/ },
  agents: { chain: "installs", cmd: ["bash", join("scripts", "setup-agents")], uses: /agent-turns|AGENTS_DIR|AGENTS_CACHE/ },
  vscode: { chain: "installs", cmd: ["bash", join("scripts", "setup-vscode")], uses: /vscode-rig/ },
} as const;
type Prereq = keyof typeof PREREQS;
const prereqsOf = (text: string): Prereq[] => (Object.keys(PREREQS) as Prereq[]).filter((p) => PREREQS[p].uses.test(text));

/** The counts `bun test` printed last: " 12 pass", " 1 fail", " 2 skip". */
function counts(output: string): { pass: number; fail: number; skip: number } {
  const last = (word: string) => {
    const all = [...output.matchAll(new RegExp(`^ *(\\d+) ${word}$`, "gm"))];
    return all.length ? Number(all[all.length - 1]![1]) : 0;
  };
  return { pass: last("pass"), fail: last("fail"), skip: last("skip") };
}

/** Each failed test's line with the error printed above it (bun prints a test's error before its "(fail)" line). */
function failures(output: string): string[] {
  const lines = output.split("\n");
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    if (/^\((pass|skip|todo)\)/.test(l)) start = i + 1;
    else if (l.startsWith("(fail)")) {
      const block = lines.slice(Math.max(start, i - 80), i + 1);
      out.push(block.join("\n"));
      start = i + 1;
    }
  }
  return out;
}

async function run(cmd: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number; output: string }> {
  const p = Bun.spawn(cmd, { cwd: ROOT, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code: await p.exited, output: out + err };
}

/** The test images the run's own steps built or found up to date: a file's testImage() need not check them again. */
const imagesChecked = new Set<string>();

async function testFile(file: string): Promise<Result> {
  const t0 = performance.now();
  const { code, output } = await run(["bun", "test", "--timeout", TIMEOUT_MS, `./${file}`], {
    HUTCH_TEST_IMAGES_CHECKED: [...imagesChecked].join(","),
  });
  const seconds = (performance.now() - t0) / 1000;
  const c = counts(output);
  // A file whose runner died without a summary is a failure, not a silent zero.
  const fail = code !== 0 && c.fail === 0 ? 1 : c.fail;
  return { file, code, seconds, ...c, fail, output };
}

async function main(): Promise<number> {
  // HUTCH_TEST_FILES: a regular expression; only the files whose path it matches run.
  const only = process.env.HUTCH_TEST_FILES ? new RegExp(process.env.HUTCH_TEST_FILES) : null;
  const files = testFiles().filter((f) => !only || only.test(f));
  const known: Record<string, number> = JSON.parse(readFileSync(DURATIONS, "utf8"));
  const jobs = Math.max(1, Number(process.env.HUTCH_TEST_JOBS ?? availableParallelism() + 1));
  const texts = new Map(files.map((f) => [f, source(f)]));
  const vmJobs = Math.max(1, Number(process.env.HUTCH_TEST_VM_JOBS ?? 2));
  const alone = new Set(files.filter((f) => /^\/\/ test: alone$/m.test(texts.get(f)!)));
  // Longest first; a file not timed yet counts as long, so a new slow file does not end the run alone.
  const queue = [...files].sort((a, b) => (known[b] ?? 60) - (known[a] ?? 60));
  const needs = new Map(files.map((f) => [f, prereqsOf(texts.get(f)!)]));
  const wanted = (Object.keys(PREREQS) as Prereq[]).filter((p) => [...needs.values()].some((n) => n.includes(p)));
  const booting = (f: string) => needs.get(f)!.some((p) => PREREQS[p].chain === "images");
  const vm = new Set(files.filter((f) => booting(f) || /^\/\/ test: vm$/m.test(texts.get(f)!)));

  const started = performance.now();
  const elapsed = () => ((performance.now() - started) / 1000).toFixed(0);
  process.stderr.write(
    `tests: ${files.length} files, ${jobs} at a time (at most ${vmJobs} booting VMs)${wanted.length ? `; first, beside them: ${wanted.join(", ")}` : ""}\n`,
  );

  // Each prerequisite, made (or found up to date) once, after the one before it in its chain; files wait for theirs.
  const ready = new Map<Prereq, Promise<Result>>();
  const chainTail = new Map<string, Promise<unknown>>();
  for (const p of wanted) {
    const { chain, cmd } = PREREQS[p];
    const step = (chainTail.get(chain) ?? Promise.resolve()).then(async (): Promise<Result> => {
      const t0 = performance.now();
      const r = await run([...cmd]);
      if (r.code === 0 && PREREQS[p].chain === "images") imagesChecked.add(p);
      const seconds = (performance.now() - t0) / 1000;
      process.stderr.write(`[${elapsed()}s] ${p} ${r.code === 0 ? "ready" : "FAILED"} in ${seconds.toFixed(0)}s\n`);
      return { file: `(${p})`, code: r.code, seconds, pass: 0, fail: r.code === 0 ? 0 : 1, skip: 0, output: r.output };
    });
    chainTail.set(chain, step);
    ready.set(p, step);
  }
  const prereqDone = new Set<Prereq>();
  for (const [p, r] of ready) void r.then(() => prereqDone.add(p));

  const results: Result[] = [];
  let running = 0;
  let aloneRunning = false;
  let vmRunning = 0;
  const runningSince = new Map<string, number>();
  // How many VM files may run now: the count that lets the VM files and the others end nearest together, judged by
  // the time each side still needs (a running file's known time less what it has run) over the slots it would have.
  // One VM file at a time unless the VM files are the longer chain; every slot up to vmJobs once only they are left.
  const vmLimit = () => {
    const left = (f: string) => known[f] ?? 60;
    const need = { vm: 0, other: 0 };
    for (const f of queue) need[vm.has(f) ? "vm" : "other"] += left(f);
    for (const [f, t0] of runningSince) need[vm.has(f) ? "vm" : "other"] += Math.max(0, left(f) - (performance.now() - t0) / 1000);
    if (!queue.some((f) => !vm.has(f))) return vmJobs;
    let best = 1;
    const span = (v: number) => Math.max(need.vm / v, need.other / (jobs - v));
    for (let v = 2; v <= Math.min(vmJobs, jobs - 1); v++) if (span(v) < span(best)) best = v;
    return best;
  };
  let done = 0;
  await new Promise<void>((finish) => {
    const next = () => {
      if (queue.length === 0 && running === 0) return finish();
      while (running < jobs && !aloneRunning && queue.length) {
        // The VM files are the run's longest chain, so one of them goes first whenever a VM slot is free; then the
        // first other file that may start now. A file alone waits for an idle machine; while a VM file waits for
        // its image, a slot is kept for it.
        // The longest VM file waiting for its image keeps the slot for HOLD_MS, then a shorter one that is ready
        // may take it (on a fresh machine an image takes minutes to build).
        const ready = (f: string) => needs.get(f)!.every((p) => prereqDone.has(p)) && (!alone.has(f) || running === 0);
        const vmFree = vmRunning < vmLimit();
        const longestVm = queue.findIndex((f) => vm.has(f));
        let i = -1;
        if (vmFree && longestVm >= 0) {
          if (ready(queue[longestVm]!)) i = longestVm;
          else if (performance.now() - started > HOLD_MS) i = queue.findIndex((f) => vm.has(f) && ready(f));
        }
        const vmWaiting = vmFree && longestVm >= 0 && i < 0;
        if (i < 0 && !(vmWaiting && running >= jobs - 1)) i = queue.findIndex((f) => !vm.has(f) && ready(f));
        if (i < 0) break;
        const file = queue.splice(i, 1)[0]!;
        running++;
        if (alone.has(file)) aloneRunning = true;
        if (vm.has(file)) vmRunning++;
        runningSince.set(file, performance.now());
        void testFile(file).then((r) => {
          runningSince.delete(file);
          running--;
          if (alone.has(file)) aloneRunning = false;
          if (vm.has(file)) vmRunning--;
          done++;
          results.push(r);
          process.stdout.write(`\n${r.file}:\n${r.output.trimEnd()}\n`);
          process.stderr.write(
            `[${elapsed()}s] ${done}/${files.length} ${r.file}: ${r.pass} passed, ${r.fail} failed in ${r.seconds.toFixed(0)}s\n`,
          );
          next();
        });
      }
    };
    // Re-check waiting files whenever a prerequisite is ready, and when the hold on the VM slot ends.
    setTimeout(next, HOLD_MS + 10).unref();
    for (const r of ready.values()) void r.then(next);
    next();
  });
  const prereqs = await Promise.all(ready.values());

  const all = [...prereqs, ...results];
  const failed = all.filter((r) => r.fail > 0);
  if (process.env.HUTCH_TEST_RECORD) {
    const times = Object.fromEntries(results.map((r) => [r.file, Math.round(r.seconds)]).sort());
    writeFileSync(DURATIONS, `${JSON.stringify(times, null, 2)}\n`);
  }
  console.log(`\n== the slowest files (of ${results.length}, ${jobs} at a time, ${elapsed()} s in all)`);
  for (const r of [...all].sort((a, b) => b.seconds - a.seconds).slice(0, 12))
    console.log(`${r.seconds.toFixed(0).padStart(6)} s  ${r.file}`);
  if (failed.length) {
    console.log("\n== failures (each printed with its file above too)");
    for (const r of failed) {
      const blocks = failures(r.output);
      console.log(`\n${r.file} (exit ${r.code}):`);
      console.log(blocks.length ? blocks.join("\n\n") : r.output.split("\n").slice(-60).join("\n"));
    }
  }
  const pass = all.reduce((n, r) => n + r.pass, 0);
  const fail = all.reduce((n, r) => n + r.fail, 0);
  console.log(`\n${pass} pass\n${fail} fail`);
  return fail > 0 || all.some((r) => r.code !== 0) ? 1 : 0;
}

process.exit(await main());
