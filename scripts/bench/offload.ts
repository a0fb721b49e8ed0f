// `hutch offload` and `hutch bring-back` against their peer, measured in the
// same run: `rsync -a` of the work tree plus a `git bundle` of the history,
// over ssh to localhost, on a generated repository and on a real one
// (tests/fixtures/semver.bundle):
//   first offload     hutch offload --box B          vs rsync -a tree/ + git bundle --all | ssh cat
//   no-change offload hutch offload --box B again    vs rsync -a tree/ again + a bundle of new commits, if any
//   one-file offload  the same after one tracked file changed (an update: only what the box lacks travels)
//   bring-back        hutch bring-back B (one commit) vs rsync -a back + ssh cat of a bundle
//
//   bun scripts/bench/offload.ts [--json] [--keep-ssh] [--runs 3] [--files 3000]
//
// Exit 0 when every run worked, goals met or not; 1 when a run broke.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, release, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { HutchHome, describeFailure, log, repoRoot, requireHutch, run, runBench, runsVerdict, sshPeer } from "./lib/env.ts";
import { median, round, table } from "./lib/stats.ts";

/** hutch/peer ratio each row must stay under: an update (a second offload) must cost half its peer or less. */
const GOALS: Record<string, number> = {
  "first offload": 1.0,
  "no-change offload": 0.5,
  "one-file offload": 0.5,
  "bring-back": 1.0,
};
const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    "keep-ssh": { type: "boolean", default: false },
    runs: { type: "string", default: "3" },
    files: { type: "string", default: "3000" },
  },
});
const RUNS = Number(flags.runs);
const FILES = Number(flags.files);
const errors: string[] = [];

requireHutch();
const home = new HutchHome();
const work = mkdtempSync(join(tmpdir(), "hutch-bench-offload-"));
let sshArgv: string[] | undefined;
async function cleanup(): Promise<void> {
  log("cleaning up");
  await home.dispose();
  rmSync(work, { recursive: true, force: true });
  if (sshArgv && !flags["keep-ssh"]) await sshPeer.stop();
}

const sh = (script: string, timeoutMs = 300_000) => run(["bash", "-c", script], { env: home.env, timeoutMs });
const q = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/** A repository of FILES files of ~4 KiB in 30 directories and 20 commits, with staged, unstaged and untracked work. */
async function generated(dir: string): Promise<void> {
  mkdirSync(dir);
  const rnd = (n: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(n))).toString("base64");
  for (let i = 0; i < FILES; i++) {
    mkdirSync(join(dir, `d${i % 30}`), { recursive: true });
    writeFileSync(join(dir, `d${i % 30}`, `f${i}.txt`), `${rnd(3000)}\n`);
  }
  const r = await sh(
    `cd ${q(dir)} && git init -q -b main && git add -A && git -c user.name=b -c user.email=b@b commit -qm c0 && ` +
      `for i in $(seq 1 19); do echo $i >> d1/f1.txt; git -c user.name=b -c user.email=b@b commit -qam c$i; done && ` +
      "echo s >> d2/f2.txt && git add d2/f2.txt && echo u >> d3/f3.txt && echo new > untracked.txt",
  );
  if (r.code !== 0) throw new Error(describeFailure(r, "generating the repository"));
}

/** The tracked file the one-file offload changes, per repository. */
const CHANGED: Record<string, string> = { gen: "d5/f5.txt", semver: "README.md" };

async function real(dir: string): Promise<void> {
  const r = await sh(
    `git clone -q -b main ${q(join(repoRoot, "tests/fixtures/semver.bundle"))} ${q(dir)} && cd ${q(dir)} && ` +
      "echo s >> index.js && git add index.js && echo u >> README.md && echo new > TODO.md",
  );
  if (r.code !== 0) throw new Error(describeFailure(r, "cloning the fixture"));
}

type Row = { hutch: number[]; peer: number[] };
const ssh = () => sshArgv!.join(" ");

async function timed(what: string, script: string): Promise<number | null> {
  const r = await sh(script);
  if (r.code === 0) return r.ms;
  errors.push(describeFailure(r, what));
  return null;
}

/**
 * The peer's update: rsync again (its delta algorithm sends what changed), and a bundle of the commits on branches
 * and tags the peer has not been sent (none: no bundle; git refuses an empty one). Branches and tags, not --all:
 * hutch's own refs/hutch/* in the same repository must not count as the peer's work. `sent` holds the tips sent.
 */
function peerUpdate(dir: string, remote: string, sent: string): string {
  return (
    `rsync -a --delete --exclude=.git -e ${q(sshArgv!.slice(0, -1).join(" "))} ${q(`${dir}/`)} ${sshArgv!.at(-1)}:${remote}/ && ` +
    `cd ${q(dir)} && not=$(sed 's/^/^/' ${q(sent)}) && ` +
    `if [ "$(git rev-list --count --branches --tags $not)" != 0 ]; then ` +
    `git bundle create -q - --branches --tags $not | ${ssh()} "cat > ${remote}.$(date +%s%N).bundle"; fi && ` +
    `git rev-parse --branches --tags > ${q(sent)}`
  );
}

async function measureRepo(name: string, make: (dir: string) => Promise<void>): Promise<Record<string, Row>> {
  const rows: Record<string, Row> = Object.fromEntries(Object.keys(GOALS).map((what) => [what, { hutch: [], peer: [] }]));
  const add = (what: string, side: string, ms: number | null) => {
    if (ms !== null) rows[what]![side as "hutch" | "peer"].push(ms);
  };
  for (let i = 0; i < RUNS; i++) {
    const dir = join(work, `${name}${i}`);
    await make(dir);
    const box = `bench-${name}-${i}`;
    await home.createBox(box);
    const remote = `/tmp/hutch-bench-peer/${name}${i}`;
    const sent = join(work, `${name}${i}.sent`);
    const order = i % 2 === 0 ? ["hutch", "peer"] : ["peer", "hutch"];
    const offload = `cd ${q(dir)} && ${q(home.bin)} offload --box ${box} >/dev/null`;
    for (const side of order) {
      const ms =
        side === "hutch"
          ? await timed(`offload ${name}`, offload)
          : await timed(
              `peer offload ${name}`,
              `${ssh()} mkdir -p ${remote} && rsync -a --exclude=.git -e ${q(sshArgv!.slice(0, -1).join(" "))} ${q(`${dir}/`)} ${sshArgv!.at(-1)}:${remote}/ && ` +
                `cd ${q(dir)} && git bundle create -q - --all | ${ssh()} "cat > ${remote}.bundle"`,
            );
      add("first offload", side, ms);
    }
    // What the peer was sent, for its updates (outside the timing: its first offload sent everything).
    await sh(`cd ${q(dir)} && git rev-parse --branches --tags > ${q(sent)}`);
    // The same again with nothing changed, then after one tracked file changed.
    for (const what of ["no-change offload", "one-file offload"]) {
      if (what === "one-file offload") await sh(`cd ${q(dir)} && echo one-file >> ${CHANGED[name]}`);
      for (const side of order)
        add(
          what,
          side,
          side === "hutch" ? await timed(`${what} ${name}`, offload) : await timed(`peer ${what} ${name}`, peerUpdate(dir, remote, sent)),
        );
    }
    // The box commits a one-file change; the peer's copy gets the same.
    const guest = `/workspace/${name}${i}`;
    const change = await sh(
      `${q(home.bin)} exec ${box} -w ${guest} -- sh -c 'echo box >> untracked.txt 2>/dev/null; echo box > box.txt && git add box.txt && git -c user.name=b -c user.email=b@b commit -qm box' && ` +
        `${ssh()} "echo box > ${remote}/box.txt"`,
    );
    if (change.code !== 0) errors.push(describeFailure(change, "the box's change"));
    const back = join(work, `${name}${i}-peer-back`);
    for (const side of order) {
      const ms =
        side === "hutch"
          ? await timed(`bring-back ${name}`, `cd ${q(dir)} && ${q(home.bin)} bring-back ${box} >/dev/null`)
          : await timed(
              `peer bring-back ${name}`,
              `mkdir -p ${q(back)} && rsync -a -e ${q(sshArgv!.slice(0, -1).join(" "))} ${sshArgv!.at(-1)}:${remote}/ ${q(`${back}/`)} && ` +
                `${ssh()} "cat ${remote}.bundle" > ${q(`${back}.bundle`)}`,
            );
      add("bring-back", side, ms);
    }
    await sh(`${ssh()} "rm -rf ${remote} ${remote}.*bundle"`);
  }
  return rows;
}

async function main(): Promise<number> {
  sshArgv = await sshPeer.start();
  log(`peer: ${ssh()}`);
  const results = {
    generated: await measureRepo("gen", generated),
    real: await measureRepo("semver", real),
  };
  const report = {
    bench: "offload",
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, kernel: release(), bun: Bun.version },
    hutch: { build: await home.buildId() },
    files: FILES,
    runs: RUNS,
    rows: Object.entries(results).flatMap(([repo, rows]) =>
      Object.entries(rows).map(([what, r]) => {
        const ratio = median(r.hutch) / median(r.peer);
        return {
          repo,
          what,
          hutchMs: round(median(r.hutch)),
          peerMs: round(median(r.peer)),
          ratio: round(ratio, 3),
          goal: GOALS[what]!,
          goalMet: ratio <= GOALS[what]!,
        };
      }),
    ),
    ok: errors.length === 0,
    errors,
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    process.stdout.write(
      [
        `hutch offload / bring-back vs rsync -a + git bundle over ssh to 127.0.0.1 — ${report.date}, ${report.machine.cpus} cpus, build ${report.hutch.build}`,
        `generated: ${FILES} files, 20 commits; real: node-semver sources, 2 commits; ${RUNS} runs each, interleaved; medians`,
        "",
        table(
          ["repo", "what", "hutch ms", "peer ms", "ratio", "goal"],
          report.rows.map((r) => [
            r.repo,
            r.what,
            String(r.hutchMs),
            String(r.peerMs),
            String(r.ratio),
            `≤ ${r.goal} ${r.goalMet ? "met" : "NOT met"}`,
          ]),
        ),
        runsVerdict(errors),
        "",
      ].join("\n"),
    );
  }
  return errors.length === 0 ? 0 : 1;
}

await runBench(main, cleanup);
