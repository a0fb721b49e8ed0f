// Offload and bring-back to a second daemon over --remote (HUTCH_REMOTE): the
// client side reads and writes the work tree, the server only sees the API.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectOnlySteps, git as g, type Home, newRepo, scratchDir } from "../helpers.ts";
import { joinClient, type Server, startServer } from "../remote.ts";

let srv: Server;
let alice: Home & { join: string };
let work: string;
beforeAll(async () => {
  srv = await startServer("hutch-srv-off-");
  alice = await joinClient(srv, "alice");
  work = scratchDir("hutch-offload-remote-");
}, 120_000);
afterAll(async () => {
  await alice?.cleanup();
  await srv?.stop();
  rmSync(work, { recursive: true, force: true });
});

test("offload to a remote daemon, work there, bring it back: the split and the commit come home, the secrets never left", async () => {
  const dir = newRepo(join(work, "app"), { "a.txt": "one\n" });
  writeFileSync(join(dir, "a.txt"), "one\nstaged\n");
  g(dir, "add", "a.txt");
  writeFileSync(join(dir, "a.txt"), "one\nstaged\nunstaged\n");
  writeFileSync(join(dir, ".env"), "TOKEN=sekrit-remote\n");
  writeFileSync(join(dir, "id_ed25519"), "sekrit-remote-key\n");

  const off = await alice.run(["offload", "--box", "far", "--json"], { cwd: dir });
  expectOnlySteps(off.stderr);
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
  expectOnlySteps(back.stderr);
  expect((JSON.parse(back.stdout) as { case: string }).case).toBe("fast-forward");
  expect(g(dir, "log", "-1", "--format=%s")).toBe("box\n");
  expect(g(dir, "status", "--porcelain")).toBe(" M a.txt\n?? .env\n?? id_ed25519\n");
  expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("one\nstaged\nunstaged\n");

  // A second offload to the same remote box: only the changed file's content travels.
  writeFileSync(join(dir, "b.txt"), "b changed here\n");
  const again = await alice.run(["offload", "--box", "far", "--json"], { cwd: dir });
  expectOnlySteps(again.stderr);
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({ updated: true, sent: { blobs: 1 } });
  const there = await alice.run(["exec", "far", "-w", guest, "--", "sh", "-c", "cat b.txt; git status --porcelain"]);
  expect(there.stdout).toBe("b changed here\n M a.txt\n M b.txt\n");
}, 120_000);

test("bring-back --session: the remote sessions' events are appended to the local session's log, each still attributed", async () => {
  const dir = newRepo(join(work, "story"), { "a.txt": "one\n" });
  const off = await alice.run(["offload", "--box", "far2", "--json"], { cwd: dir });
  expect(off.code).toBe(0);
  const guest = (JSON.parse(off.stdout) as { guestDir: string }).guestDir;
  // The story begins here, in a local session; the work goes on in a session on the server's box.
  expect((await alice.run(["--remote", "local", "box", "create", "home", "--start"])).code).toBe(0);
  const local = await alice.run(["--remote", "local", "run", "home", "--detach", "--label", "story"]);
  expect(local.code, local.stderr).toBe(0);
  const lsid = local.stdout.trim();
  const remote = await alice.run(["run", "far2", "--detach", "--label", "far work"]);
  expect(remote.code, remote.stderr).toBe(0);
  const rsid = remote.stdout.trim();
  expect((await alice.run(["session", "annotate", rsid, "did the work on the server"])).code).toBe(0);
  expect((await alice.run(["exec", "far2", "-w", guest, "--", "sh", "-c", "echo two >> a.txt && git commit -qam remote"])).code).toBe(0);

  type Ev = { seq: number; at: string; kind: string; actor: { id: string }; data: Record<string, unknown> };
  const logOf = async (run: Home["run"], sid: string, where: string[]) => {
    const r = await run([...where, "session", "log", sid, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Ev);
  };
  const remoteLog = await logOf(alice.run, rsid, []);
  const back = await alice.run(["bring-back", "far2", "--session", lsid, "--json"], { cwd: dir });
  expectOnlySteps(back.stderr);
  expect(back.code, back.stdout).toBe(0);
  const res = JSON.parse(back.stdout) as { case: string; sessionLog: { from: string[]; events: number; remote: string } };
  expect(res.case).toBe("fast-forward");
  expect(res.sessionLog).toMatchObject({ from: [rsid], remote: "srv" });
  expect(res.sessionLog.events).toBeGreaterThanOrEqual(remoteLog.length);
  expect(g(dir, "log", "-1", "--format=%s")).toBe("remote\n");

  const story = await logOf(alice.run, lsid, ["--remote", "local"]);
  const imported = story.filter((e) => e.kind === "session.event.imported");
  const fromRemote = imported.filter((e) => (e.data.from as { session: string }).session === rsid);
  // Every remote event, in order, with its own actor and time; the note by alice on the server is among them.
  // (The remote shell may print after the log was read here: at least those, in order.)
  const seqs = fromRemote.map((e) => (e.data.from as { seq: number }).seq);
  expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
  expect(seqs.length).toBeGreaterThanOrEqual(remoteLog.length);
  for (const r of remoteLog) expect(fromRemote[r.seq - 1]?.data).toMatchObject({ kind: r.kind, at: r.at, actor: r.actor });
  const note = fromRemote.find((e) => e.data.kind === "annotation.added")!;
  const original = remoteLog.find((e) => e.kind === "annotation.added")!;
  expect(note.data).toMatchObject({ at: original.at, actor: original.actor, data: { text: "did the work on the server" } });
  expect(story.at(-1)).toMatchObject({ kind: "session.work.returned", data: { box: "far2", remote: "srv", case: "fast-forward" } });
  const human = await alice.run(["--remote", "local", "session", "log", lsid]);
  expect(human.stdout).toContain(`[srv ${rsid}#${original.seq}]`);
  expect(human.stdout).toContain("✎ did the work on the server");
  expect(human.stdout).toContain("box far2 on srv brought back (fast-forward)");

  // Again: nothing new came home, and no event is appended twice.
  const again = await alice.run(["bring-back", "far2", "--session", lsid, "--json"], { cwd: dir });
  expect(again.code).toBe(0);
  const story2 = await logOf(alice.run, lsid, ["--remote", "local"]);
  const notes = story2.filter((e) => e.kind === "session.event.imported" && e.data.kind === "annotation.added");
  expect(notes.length).toBe(1);
  // A session that does not exist here is refused before anything is brought back.
  const before = g(dir, "for-each-ref");
  const bad = await alice.run(["bring-back", "far2", "--session", `ses_${"0".repeat(20)}`], { cwd: dir });
  expect(bad.code, bad.stderr).toBe(4);
  expect(g(dir, "for-each-ref")).toBe(before);
}, 180_000);
