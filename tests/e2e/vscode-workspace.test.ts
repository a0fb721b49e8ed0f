// Offload, bring back and ports from the packaged extension in a real VS Code
// (code-server, tests/vscode-rig.ts), driven by tests/e2e/vscode/drive-workspace.mjs,
// against the real daemon and box the CLI acts in. The workspace is a git
// repository with a staged and an unstaged change and a held-back .env.
// Keeps a screenshot at artifacts/vscode-workspace.png.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { check, OffloadOutput, OpProgress } from "../../shared/src/index.ts";
import { HUTCH, ROOT, makeHome, type Home, scratchDir } from "../helpers.ts";
import { drive, startCodeServer, type Rig } from "../vscode-rig.ts";

const SHOT = join(ROOT, "artifacts/vscode-workspace.png");

let h: Home;
let rig: Rig;

const git = (cwd: string, ...args: string[]) => {
  const r = Bun.spawnSync(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
};

beforeAll(async () => {
  h = makeHome("hutch-vscw-");
  rig = await startCodeServer(h.env);
  // Made before the page loads, so the extension finds the repository when it activates.
  git(rig.ws, "init", "-q", "-b", "main");
  git(rig.ws, "add", "src/main.ts");
  git(rig.ws, "commit", "-q", "-m", "start");
  writeFileSync(join(rig.ws, "notes.txt"), "staged\n");
  git(rig.ws, "add", "notes.txt");
  appendFileSync(join(rig.ws, "src/main.ts"), "export const unstaged = true;\n");
  writeFileSync(join(rig.ws, ".env"), "SECRET=1\n");
}, 120_000);

afterAll(async () => {
  await rig?.stop();
  await h?.cleanup();
});

test("offload, bring back and ports from VS Code", async () => {
  mkdirSync(join(ROOT, "artifacts"), { recursive: true });
  const { out, err, code } = await drive(join(import.meta.dir, "vscode/drive-workspace.mjs"), {
    ...rig.env,
    BASE: rig.base,
    WS: rig.ws,
    HUTCH,
    SHOT,
  });
  if (code !== 0) process.stderr.write(`failure screenshot: ${SHOT.replace(/\.png$/, "-fail.png")}\n`);
  expect(err).not.toContain("FAIL");
  for (const step of [
    "the dry-run list shows what goes",
    "the box shows in the sidebar as offloaded",
    "the chosen agent (shell) runs in a session in the box",
    "the box holds the staged and unstaged split without .env",
    "bring back says fast-forward",
    "an overlapping change is kept on branch hutch/e2e-off",
    "shows in the Ports view",
    "reaches the box's server",
    "Open in Browser opens",
    "Stop Forwarding closes the local port",
    "an offload made from the CLI shows in the sidebar by itself",
  ]) {
    expect(out).toContain(step);
  }
  expect(code).toBe(0);
  expect(existsSync(SHOT)).toBe(true);
}, 600_000);

test("offload and bring-back --json: steps as NDJSON on stderr, one document on stdout", async () => {
  const dir = scratchDir("hutch-vscw-steps-");
  writeFileSync(join(dir, "a.txt"), "a\n");
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "a.txt");
  git(dir, "commit", "-q", "-m", "a");
  writeFileSync(join(dir, "b.txt"), "b\n");
  const steps = (stderr: string) =>
    stderr
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as unknown);
  const off = await h.run(["offload", "--box", "json-steps", "--json"], { cwd: dir });
  expect(off.code, off.stderr).toBe(0);
  const doc: unknown = JSON.parse(off.stdout);
  expect(check(OffloadOutput, doc)).toBe(true);
  const offSteps = steps(off.stderr);
  expect(offSteps.length).toBeGreaterThan(1);
  for (const s of offSteps) expect(check(OpProgress, s)).toBe(true);
  expect(offSteps.map((s) => (s as { title: string }).title)).toContain("sending to box json-steps");
  const back = await h.run(["bring-back", "json-steps", "--json"], { cwd: dir });
  expect(back.code, back.stderr).toBe(0);
  expect(JSON.parse(back.stdout).case).toBe("nothing");
  expect(steps(back.stderr).map((s) => (s as { title: string }).title)).toContain("reading box json-steps");
}, 120_000);
