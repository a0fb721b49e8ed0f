// Offload and bring-back to a second daemon over --remote (HUTCH_REMOTE): the
// client side reads and writes the work tree, the server only sees the API.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Home } from "../helpers.ts";
import { joinClient, type Server, startServer } from "../remote.ts";

let srv: Server;
let alice: Home & { join: string };
let work: string;
beforeAll(async () => {
  srv = await startServer("hutch-srv-off-");
  alice = await joinClient(srv, "alice");
  work = mkdtempSync(join(tmpdir(), "hutch-offload-remote-"));
}, 120_000);
afterAll(async () => {
  await alice?.cleanup();
  await srv?.stop();
  rmSync(work, { recursive: true, force: true });
});

function g(dir: string, ...args: string[]): string {
  const r = Bun.spawnSync(["git", ...args], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString();
}

test("offload to a remote daemon, work there, bring it back: the split and the commit come home, the secrets never left", async () => {
  const dir = join(work, "app");
  mkdirSync(dir);
  g(dir, "init", "-q", "-b", "main");
  g(dir, "config", "user.email", "dev@example.com");
  g(dir, "config", "user.name", "Dev");
  writeFileSync(join(dir, "a.txt"), "one\n");
  g(dir, "add", ".");
  g(dir, "commit", "-qm", "start");
  writeFileSync(join(dir, "a.txt"), "one\nstaged\n");
  g(dir, "add", "a.txt");
  writeFileSync(join(dir, "a.txt"), "one\nstaged\nunstaged\n");
  writeFileSync(join(dir, ".env"), "TOKEN=sekrit-remote\n");
  writeFileSync(join(dir, "id_ed25519"), "sekrit-remote-key\n");

  const off = await alice.run(["offload", "--box", "far", "--json"], { cwd: dir });
  expect(off.stderr).toBe("");
  expect(off.code).toBe(0);
  const guest = (JSON.parse(off.stdout) as { guestDir: string }).guestDir;
  const status = await alice.run(["exec", "far", "-w", guest, "--", "git", "status", "--porcelain"]);
  expect(status.stdout).toBe("MM a.txt\n");
  // Searched for on the server: in the box, and anywhere under the serving daemon's home.
  const inBox = await alice.run(["exec", "far", "--", "sh", "-c", "grep -rl sekrit /workspace /home/hutch /tmp || true"]);
  expect(inBox.stdout).toBe("");
  const onServer = Bun.spawnSync(["grep", "-rl", "sekrit-remote", srv.home.home], { stdout: "pipe" });
  expect(onServer.stdout.toString()).toBe("");

  const work2 = await alice.run(["exec", "far", "-w", guest, "--", "sh", "-c", "echo b > b.txt && git add b.txt && git commit -qm box"]);
  expect(work2.code).toBe(0);
  const back = await alice.run(["bring-back", "far", "--json"], { cwd: dir });
  expect(back.stderr).toBe("");
  expect((JSON.parse(back.stdout) as { case: string }).case).toBe("fast-forward");
  expect(g(dir, "log", "-1", "--format=%s")).toBe("box\n");
  expect(g(dir, "status", "--porcelain")).toBe(" M a.txt\n?? .env\n?? id_ed25519\n");
  expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("one\nstaged\nunstaged\n");
}, 120_000);
