// hutch session move: a local session and its box's work continue on a
// second daemon (over --remote); the remote log begins with the local one's
// events, each still attributed, and the local log says where it went.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Home } from "../helpers.ts";
import { joinClient, type Server, startServer } from "../remote.ts";

let srv: Server;
let alice: Home & { join: string };
beforeAll(async () => {
  srv = await startServer("hutch-srv-move-");
  alice = await joinClient(srv, "alice");
}, 120_000);
afterAll(async () => {
  await alice?.cleanup();
  await srv?.stop();
});

type Ev = { seq: number; at: string; kind: string; actor: { id: string }; data: Record<string, unknown> };

async function logOf(sid: string, where: string[]): Promise<Ev[]> {
  const r = await alice.run([...where, "session", "log", sid, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Ev);
}

test("the box's work and the log move; the remote continues the log, the local one shows where it went", async () => {
  const here = ["--remote", "local"];
  expect((await alice.run([...here, "box", "create", "mover", "--start"])).code).toBe(0);
  const put = await alice.run([...here, "exec", "mover", "--", "sh", "-c", "mkdir -p /workspace/proj && echo hi > /workspace/proj/f.txt"]);
  expect(put.code, put.stderr).toBe(0);
  const started = await alice.run([...here, "run", "mover", "--detach", "--label", "moving"]);
  expect(started.code, started.stderr).toBe(0);
  const lsid = started.stdout.trim();
  expect((await alice.run([...here, "session", "annotate", lsid, "before the move"])).code).toBe(0);
  const before = await logOf(lsid, here);

  const r = await alice.run(["session", "move", lsid, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  const m = JSON.parse(r.stdout) as { to: { remote: string; session: string; box: string }; entries: string[]; events: number };
  expect(m.to).toMatchObject({ remote: "srv", box: "mover" });
  expect(m.entries).toEqual(["proj"]);
  // The shell may still print while the move reads the log: at least what was there before it, in order.
  expect(m.events).toBeGreaterThanOrEqual(before.length);

  // The work is there.
  const there = await alice.run(["exec", "mover", "--", "cat", "/workspace/proj/f.txt"]);
  expect(there.stdout).toBe("hi\n");
  // The remote log begins with the local one, each event with its own actor and time, then says where it came from.
  const remoteLog = await logOf(m.to.session, []);
  const imported = remoteLog.filter((e) => e.kind === "session.event.imported");
  expect(imported.map((e) => (e.data.from as { seq: number }).seq)).toEqual(Array.from({ length: m.events }, (_, i) => i + 1));
  for (const b of before) expect(imported[b.seq - 1]?.data).toMatchObject({ kind: b.kind, at: b.at, actor: b.actor });
  const note = imported.find((e) => e.data.kind === "annotation.added")!;
  const original = before.find((e) => e.kind === "annotation.added")!;
  expect(note.data).toMatchObject({ at: original.at, actor: original.actor, data: { text: "before the move" } });
  expect(remoteLog.find((e) => e.kind === "session.arrived")?.data).toMatchObject({ from: { session: lsid, box: "mover" } });
  // The local log ends saying where it went, and the local box is stopped, not deleted.
  // (Stopping the box ends its terminal, so the session closes after the marker.)
  const after = await logOf(lsid, here);
  const moved = after.findIndex((e) => e.kind === "session.moved");
  expect(after[moved]?.data).toEqual({ to: m.to });
  expect(after.slice(moved + 1).map((e) => e.kind)).not.toContain("annotation.added");
  expect(
    after.slice(moved + 1).every((e) => ["box.state.changed", "exec.exited", "session.closed", "output.appended"].includes(e.kind)),
  ).toBe(true);
  const human = await alice.run([...here, "session", "log", lsid]);
  expect(human.stdout).toContain(`moved to srv: session ${m.to.session} on box mover`);
  const box = await alice.run([...here, "box", "list", "--json"]);
  expect((JSON.parse(box.stdout) as { name: string; state: string }[]).find((b) => b.name === "mover")?.state).toBe("stopped");

  // The log goes on there; the session left behind moves no more.
  expect((await alice.run(["session", "annotate", m.to.session, "after the move"])).code).toBe(0);
  const again = await alice.run(["session", "move", lsid]);
  expect(again.code).toBe(1);
  expect(again.stderr).toContain(`session ${lsid} is closed`);
  // Another local session on a box whose name the remote already has: refused before anything moves, naming --box.
  expect((await alice.run([...here, "box", "start", "mover"])).code).toBe(0);
  const second = (await alice.run([...here, "run", "mover", "--detach"])).stdout.trim();
  const clash = await alice.run(["session", "move", second]);
  expect(clash.code).toBe(1);
  expect(clash.stderr).toContain("already has a box named mover");
  expect(clash.stderr).toContain("--box NAME");
  expect((await logOf(second, here)).map((e) => e.kind)).not.toContain("session.moved");
  const nowhere = await alice.run(["--remote", "local", "session", "move", lsid]);
  expect(nowhere.code).toBe(2);
  expect(nowhere.stderr).toContain("--remote R");
}, 180_000);
