// Dispatch end to end: real claude and codex CLIs in process boxes forked
// from one snapshot, against the fake model API (the one fake allowed), each
// worker scripted through "run exactly:" to do something else by its box's
// name (its hostname); graded by a check in a fresh box, the protected files
// put back first; the winner brought home through bring-back.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Events, read, type SessionEvent } from "../../shared/src/index.ts";
import { makeHome, unmountUnder, waitFor, type Home } from "../helpers.ts";
import { sharedMount } from "../../host/src/engine/agent-disks.ts";
import { events, fakeBindings, newSecrets } from "../agent-turns.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";

const CACHE = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
const SECRETS = newSecrets();
let h: Home;
let fake: FakeModel;

interface Worker {
  n: number;
  agent: string;
  box: string;
  boxDeleted: boolean;
  session: string | null;
  status: string;
  verdict: { verdict: string; exit: number | null; score: number | null; tail: string } | null;
  score: number | null;
  diffstat: { files: number; added: number; removed: number } | null;
  diff: string | null;
  usage: { input: number; output: number };
}
interface Result {
  id: string;
  state: string;
  session: string;
  winner: string | null;
  winnerWorker: number | null;
  reason?: string;
  tornDown: boolean;
  workers: Worker[];
  bringBack?: { case: string; files: string[] };
}

const lastLine = (s: string) => JSON.parse(s.trim().split("\n").at(-1)!) as Result;
const snapshotOf = async (box: string) =>
  (
    JSON.parse((await h.run(["snapshot", "create", box, "--json"])).stdout.trim().split("\n").at(-1)!) as {
      value: { snapshot: { id: string } };
    }
  ).value.snapshot.id;
const boxNames = async () =>
  (JSON.parse((await h.run(["box", "list", "--json"])).stdout) as { name: string; state: string }[]).map((b) => b.name);

beforeAll(async () => {
  h = makeHome("hutch-dsp-");
  // claude and codex from the shared cache; pi left out, so a pi worker's agent fails to start.
  const agents = mkdtempSync(join(CACHE, "..", "hutch-dsp-agents-"));
  // Hard links (the cache's file system), not symlinks: the daemon lists real directories only.
  const pinned = readdirSync(CACHE, { withFileTypes: true }).filter((e) => e.isDirectory() && /^(claude|codex)-\d/.test(e.name));
  for (const name of pinned.map((e) => e.name))
    for (const f of [name, `${name}.v2.img`])
      if (existsSync(join(CACHE, f))) expect(Bun.spawnSync(["cp", "-al", join(CACHE, f), join(agents, f)]).exitCode).toBe(0);
  h.env.HUTCH_AGENTS_DIR = agents;
  h.env.HUTCH_AGENT_INSTALL = "0";
  fake = await startFakeModel();
  writeFileSync(join(h.home, "config.json"), JSON.stringify(fakeBindings(fake)));
  for (const [name, value] of Object.entries(SECRETS)) expect((await h.run(["secret", "set", name], { stdin: value })).code).toBe(0);
  // The box the --from tests snapshot.
  expect((await h.run(["box", "create", "src", "--start"])).code).toBe(0);
  expect((await h.run(["exec", "src", "--", "sh", "-c", "echo bad > /workspace/answer.txt"])).code).toBe(0);
}, 120_000);

afterAll(async () => {
  await h.cleanup();
  // Its disks were mounted for the boxes under the shared mount of this cache: unmounted before it goes.
  unmountUnder(sharedMount(h.env.HUTCH_AGENTS_DIR!), true);
  rmSync(h.env.HUTCH_AGENTS_DIR!, { recursive: true, force: true });
  await fake.stop();
});

/** A two-worker dispatch whose model answers only after a minute (the fake's latency), left running for the test to interrupt. */
function slowDispatch(snap: string, extra: string[] = []) {
  fake.reset();
  fake.latencyMs = 60_000;
  return h.spawn([
    "dispatch",
    "--from",
    snap,
    "-k",
    "2",
    "--agent",
    "claude",
    "--check",
    "true",
    ...extra,
    "--json",
    "--",
    "create a.txt containing hi",
  ]);
}

function makeRepo(): string {
  const repo = join(mkdtempSync(join(tmpdir(), "hutch-dsp-repo-")), "calc");
  mkdirSync(join(repo, "tests"), { recursive: true });
  writeFileSync(join(repo, "answer.txt"), "bad\n");
  writeFileSync(join(repo, "tests", "check.sh"), "grep -qx good answer.txt\n");
  const git = (...args: string[]) =>
    Bun.spawnSync(["git", "-C", repo, ...args], {
      env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@t", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@t" },
    });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "start");
  return repo;
}

test("--here: worker 2 passes and wins; the worker that edits the test is graded against the restored test and fails; the winner comes home; the losers' boxes go, their logs, diffs and verdicts stay", async () => {
  const repo = makeRepo();
  fake.reset();
  const task =
    "run exactly: cd /workspace/calc && case $(hostname) in *-w2) echo good > answer.txt;; *-w3) echo good > tests/check.sh; echo still-bad > answer.txt;; *) echo worse > answer.txt;; esac";
  const r = await h.run(["dispatch", "--here", "-k", "3", "--agent", "claude", "--check", "sh tests/check.sh", "--json", "--", task], {
    cwd: repo,
  });
  expect(r.code, r.stderr + r.stdout).toBe(0);
  const res = lastLine(r.stdout);
  expect(res.state).toBe("done");
  expect(res.winnerWorker).toBe(2);
  const [w1, w2, w3] = res.workers as [Worker, Worker, Worker];
  expect(res.winner).toBe(w2.box);
  expect([w1.status, w2.status, w3.status]).toEqual(["failed", "passed", "failed"]);
  // Worker 3 made its check pass by editing it; graded against the base's test, it failed.
  expect(w3.verdict!.tail).toContain("1 protected file restored from the base");
  expect(readFileSync(w3.diff!, "utf8")).toContain("+good");
  expect(readFileSync(w3.diff!, "utf8")).toContain("tests/check.sh");
  expect(readFileSync(w1.diff!, "utf8")).toContain("+worse");
  expect(w2.diffstat).toEqual({ files: 1, added: 1, removed: 1 });
  for (const w of res.workers) expect(w.usage.output).toBeGreaterThan(0);

  // The winner's change came home through bring-back; the test file is the user's own.
  expect(res.bringBack?.case).toBe("fast-forward");
  expect(readFileSync(join(repo, "answer.txt"), "utf8")).toBe("good\n");
  expect(readFileSync(join(repo, "tests", "check.sh"), "utf8")).toBe("grep -qx good answer.txt\n");

  // Losers' boxes (and the graders, and the offloaded base) are gone; the winner's stays.
  const names = await boxNames();
  expect(names).toContain(w2.box);
  expect(names.filter((n) => n.startsWith("calc-dsp-") || /^dsp-.*-g\d+$/.test(n))).toEqual([]);
  for (const w of [w1, w3]) {
    expect(w.boxDeleted).toBe(true);
    expect(names).not.toContain(w.box);
    const log = await events(h, w.session!);
    expect(log.some((e) => read(e, Events.verdictRecorded)?.verdict === "failed")).toBe(true);
    expect(log.some((e) => e.kind === "tool.called")).toBe(true);
  }

  // The orchestration session holds the whole dispatch; status reads the same.
  const orch = await events(h, res.session);
  const kinds = orch.map((e) => e.kind);
  expect(kinds.filter((k) => k === "dispatch.worker.started").length).toBe(3);
  expect(kinds.filter((k) => k === "verdict.recorded").length).toBe(3);
  const fin = orch.map((e) => read(e, Events.dispatchFinished)).find((d) => d !== null);
  expect(fin).toMatchObject({ status: "done", winner: 2 });
  expect(fin!.usage.output).toBeGreaterThan(0);
  const status = await h.run(["dispatch", "status", res.id, "--json"]);
  expect(JSON.parse(status.stdout)).toMatchObject({ id: res.id, state: "done", winner: w2.box, tornDown: true });
  expect((await h.run(["box", "delete", w2.box])).code).toBe(0);
  rmSync(dirname(repo), { recursive: true, force: true });
}, 600_000);

test("mixed agents, a hanging worker stopped at --timeout, an agent that fails to start: each verdict named, the dispatch picks among the rest", async () => {
  const snap = await snapshotOf("src");
  fake.reset();
  // Worker 3's command prints the marker (split in the prompt so the prompt itself does not hold it): the fake never answers its tool result.
  const task =
    "run exactly: cd /workspace && case $(hostname) in *-w1) echo good > answer.txt; echo 3 > score;; *-w2) echo good > answer.txt; echo 7 > score; echo 'score: 1';; *-w3) echo 'hutch-fake: h''ang';; esac";
  const t0 = Date.now();
  const r = await h.run([
    "dispatch",
    "--from",
    snap,
    "-k",
    "4",
    "--agents",
    "claude,codex,claude,pi",
    "--check",
    'grep -qx good answer.txt && echo "score: $(cat score)"',
    "--pick",
    "best",
    "--timeout",
    "25",
    "--json",
    "--",
    task,
  ]);
  expect(r.code, r.stderr + r.stdout).toBe(0);
  const res = lastLine(r.stdout);
  const [w1, w2, w3, w4] = res.workers as [Worker, Worker, Worker, Worker];
  expect(res.workers.map((w) => w.agent)).toEqual(["claude", "codex", "claude", "pi"]);
  expect([w1.status, w2.status, w3.status, w4.status]).toEqual(["passed", "passed", "timeout", "error"]);
  expect(w3.verdict!.tail).toContain("--timeout 25s");
  expect(w4.verdict!.tail).toContain("not installed");
  expect(fake.requests.some((q) => q.hung)).toBe(true);
  // Both passed; the check's own score line is what counts (worker 2's agent printing one is not the check's output), and best wins.
  expect([w1.score, w2.score]).toEqual([3, 7]);
  expect(res.winnerWorker).toBe(2);
  expect(Date.now() - t0).toBeLessThan(300_000);
  const orch = await events(h, res.session);
  const verdicts = orch.map((e) => read(e, Events.verdictRecorded)).filter((v) => v !== null);
  expect(verdicts.map((v) => [v.worker, v.agent, v.verdict]).sort()).toEqual([
    [1, "claude", "passed"],
    [2, "codex", "passed"],
    [3, "claude", "timeout"],
    [4, "pi", "error"],
  ]);
  const names = await boxNames();
  expect(names.filter((n) => n.startsWith("dsp-"))).toEqual([w2.box]);
  expect((await h.run(["box", "delete", w2.box])).code).toBe(0);
  fake.reset();
}, 600_000);

test("a daemon SIGKILLed mid-dispatch (one worker at work, one waiting its turn): after restart `dispatch status` says it was interrupted and torn down, and no box of it is left", async () => {
  const cli = slowDispatch(await snapshotOf("src"), ["--concurrency", "1"]);
  const running = await waitFor(
    "the dispatch to start its workers",
    async () => {
      const list = JSON.parse((await h.run(["dispatch", "list", "--json"])).stdout) as { id: string; state: string; workers: Worker[] }[];
      const d = list.find((x) => x.state === "running");
      return d && fake.modelCalls().length > 0 ? d : null;
    },
    120_000,
  );
  const id = running.id;
  expect(running.workers.map((w) => w.status)).toEqual(["running", "pending"]);
  process.kill(h.daemonPid()!, "SIGKILL");
  cli.kill();
  // The next verb starts a daemon, which finds the dispatch unfinished.
  const first = JSON.parse((await h.run(["dispatch", "status", id, "--json"])).stdout) as Result;
  expect(first.state).toBe("interrupted");
  expect(first.reason).toContain("torn down");
  const done = await waitFor(
    "the teardown",
    async () => {
      const s = JSON.parse((await h.run(["dispatch", "status", id, "--json"])).stdout) as Result;
      return s.tornDown ? s : null;
    },
    120_000,
  );
  expect(done.workers.every((w) => w.status === "cancelled" && w.boxDeleted)).toBe(true);
  expect((await boxNames()).filter((n) => n.startsWith("dsp-"))).toEqual([]);
  const orch = (await events(h, done.session)) as SessionEvent[];
  expect(orch.map((e) => read(e, Events.dispatchFinished)?.status).filter(Boolean)).toEqual(["interrupted"]);
  fake.reset();
}, 300_000);

test("the check runs with no network: the worker's box reaches the model API through the broker, the grading box reaches nothing", async () => {
  fake.reset();
  const snap = await snapshotOf("src");
  // The same request from both sides: the worker (a claude-bound box) asks the model API through its broker URL with
  // its stub and keeps the status, the URL and the stub; the check asks the same, stub and all, from the grading box.
  const ask = `curl -s -f -o /dev/null -w '%{http_code}' --max-time 5`;
  const r = await h.run([
    "dispatch",
    "--from",
    snap,
    "-k",
    "1",
    "--agent",
    "claude",
    "--check",
    `echo "the worker saw $(cat worker-saw)"; test "$(cat worker-saw)" = 200 && ! ${ask} -H "x-api-key: $(cat key)" "$(cat url)/v1/models" && echo isolated`,
    "--json",
    "--",
    `run exactly: cd /workspace && echo "$ANTHROPIC_BASE_URL" > url && echo "$ANTHROPIC_API_KEY" > key && ${ask} -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models" > worker-saw || true`,
  ]);
  const res = lastLine(r.stdout);
  expect(res.workers[0]!.verdict?.tail, JSON.stringify(res.workers[0])).toContain("isolated");
  expect(r.code, r.stderr + r.stdout).toBe(0);
  expect(fake.requests.filter((q) => q.path.startsWith("/v1/models")).length).toBe(1);
  expect((await h.run(["box", "delete", res.winner!])).code).toBe(0);
}, 300_000);

test("grading carries only the work tree: a worker that plants a .pth in its home (python3 then exits 0 at start) is graded failed; the honest one, which also deletes a file, passes", async () => {
  fake.reset();
  expect((await h.run(["exec", "src", "--", "sh", "-c", "echo old > /workspace/stale"])).code).toBe(0);
  const snap = await snapshotOf("src");
  // The task: answer.txt says good, and the base's stale file is gone. Worker 1 deletes the file only, makes every
  // python3 in its box end with status 0 before it runs anything, and records that the trick works there; worker 2
  // does the task (the deletion shows the grading box's work tree is the worker's, not the base's with it on top).
  const site = "$HOME/.local/lib/python3.11/site-packages";
  const task =
    `run exactly: cd /workspace && case $(hostname) in ` +
    `*-w1) rm stale; mkdir -p ${site} && echo 'import os; os._exit(0)' > ${site}/zz.pth; python3 -c 'raise SystemExit(3)'; echo "planted:$?" > planted;; ` +
    `*-w2) echo good > answer.txt; rm stale;; esac`;
  const r = await h.run([
    "dispatch",
    "--from",
    snap,
    "-k",
    "2",
    "--agent",
    "claude",
    "--check",
    `cat planted 2>/dev/null; test ! -e stale && python3 -c "import sys; sys.exit(open('answer.txt').read() != 'good\\n')"`,
    "--json",
    "--",
    task,
  ]);
  expect(r.code, r.stderr + r.stdout).toBe(0);
  const res = lastLine(r.stdout);
  const [w1, w2] = res.workers as [Worker, Worker];
  // The trick held in the worker's own box, and its result (the file it wrote in the work tree) reached the check.
  expect(w1.verdict!.tail, JSON.stringify(w1)).toContain("planted:0");
  expect([w1.status, w2.status], JSON.stringify(res.workers)).toEqual(["failed", "passed"]);
  expect(w1.verdict!.exit).toBe(1);
  expect(res.winnerWorker).toBe(2);
  expect((await h.run(["box", "delete", res.winner!])).code).toBe(0);
  expect((await h.run(["exec", "src", "--", "rm", "/workspace/stale"])).code).toBe(0);
  fake.reset();
}, 300_000);

test("Ctrl-C of the CLI cancels the dispatch: its boxes are deleted, the workers' logs kept, and status says cancelled", async () => {
  const cli = slowDispatch(await snapshotOf("src"));
  await waitFor("a worker's first model call", () => fake.modelCalls().length > 0 || null, 120_000);
  cli.kill("SIGINT");
  expect(await cli.exited).toBe(1);
  const res = lastLine(await new Response(cli.stdout as ReadableStream).text());
  expect(res.state).toBe("cancelled");
  expect(res.tornDown).toBe(true);
  expect(res.workers.every((w) => w.status === "cancelled" && w.boxDeleted && w.session !== null)).toBe(true);
  expect((await boxNames()).filter((n) => n.startsWith("dsp-"))).toEqual([]);
  for (const w of res.workers) expect((await events(h, w.session!)).some((e) => e.kind === "input.sent")).toBe(true);
  fake.reset();
}, 300_000);

test("bad input: a clear error and nothing started", async () => {
  const count = async () => (JSON.parse((await h.run(["dispatch", "list", "--json"])).stdout) as unknown[]).length;
  const before = await count();
  const none = await h.run(["dispatch", "-k", "2", "--check", "true", "--", "x"]);
  expect(none.code).toBe(2);
  expect(none.stderr).toContain("--from SNAP and --here");
  const missing = await h.run(["dispatch", "--from", "snap_00000000000000000000", "-k", "2", "--check", "true", "--", "x"]);
  expect(missing.code).toBe(4);
  const unknown = await h.run(["dispatch", "status", "dsp_00000000000000000000"]);
  expect(unknown.code).toBe(4);
  expect(unknown.stderr).toContain("hutch dispatch list");
  const noCheck = await h.run(["dispatch", "--from", "snap_00000000000000000000", "-k", "2", "--", "x"]);
  expect(noCheck.code).toBe(2);
  expect(noCheck.stderr).toContain("--check is required");
  expect(await count()).toBe(before);
}, 60_000);
