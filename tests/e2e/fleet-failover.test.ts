// The fleet plane's failover and moves (issue 30), on three `hutch serve
// --cluster` servers and a real 3-node NATS JetStream cluster on loopback:
// - three `--restart always` boxes on A, with checkpoints; A and its boxes
//   SIGKILLed: the boxes run on B and C from their latest checkpoint, their
//   sessions carry on in the same log, gapless, with a box.moved event; A
//   restarted finds its copies superseded, removes them and writes nothing
//   to their sessions: one copy of each box;
// - `box move` of a process box: its files and its session continue on the
//   other server; a Claude Code session's next turn (against the fake model)
//   there resumes the agent's conversation;
// - `node cordon` keeps new boxes off a server; `node drain` moves every box
//   off while a client keeps exec-ing into one of them through another
//   server, and every exec answers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Box, BoxPolicy, FleetNodeRow, SessionEvent } from "../../shared/src/index.ts";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { AGENTS_DIR, events, fakeBindings, newSecrets, PROMPT } from "../agent-turns.ts";
import { type FakeModel, startFakeModel } from "../fixtures/fake-model/index.ts";
import { HUTCH, type Home, waitFor } from "../helpers.ts";
import { type Server, startServer, stopServe, stopServers, FLEET_TEARDOWN_MS } from "../remote.ts";

let nats: NatsCluster;
let urls: string;
const servers: Server[] = [];
let a: Server;
let b: Server;
let c: Server;
/** A restarted A (same home, port and name). */
let a2: ReturnType<typeof Bun.spawn> | undefined;
let fake: FakeModel;

/** What each server logged last: the homes go with the run, so a failure carries it. */
function serverLogs(): string {
  return servers
    .map((s, i) => {
      let text = "";
      try {
        text = s.log();
      } catch {
        text = "(no log)";
      }
      return `--- server ${"abc"[i]}'s log, last 30 lines:\n${text.trimEnd().split("\n").slice(-30).join("\n")}`;
    })
    .join("\n");
}

async function ok(h: Home, args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}\n${serverLogs()}`);
  return r.stdout;
}

const fleetArgs = (node: string) => ["--cluster", urls, "--node", node];

function copyKey(to: Home): void {
  mkdirSync(join(to.home, "keys"), { recursive: true, mode: 0o700 });
  copyFileSync(join(a.home.home, "keys", "fleet.key"), join(to.home, "keys", "fleet.key"));
  chmodSync(join(to.home, "keys", "fleet.key"), 0o600);
}

async function boxes(h: Home): Promise<Box[]> {
  return JSON.parse(await ok(h, ["box", "list", "--json"])) as Box[];
}

/** A's daemon and every process of its boxes, killed at once (a server that dies with its machine). */
function killA(ids: string[]): void {
  a.proc.kill("SIGKILL");
  for (const pid of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    let env = "";
    try {
      env = readFileSync(`/proc/${pid}/environ`, "latin1");
    } catch {
      continue;
    }
    if (ids.some((id) => env.includes(`HUTCH_BOX_ID=${id}\0`)))
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        // gone already
      }
  }
}

beforeAll(async () => {
  nats = await startNatsCluster(3);
  urls = nats.urls.join(",");
  fake = await startFakeModel();
  // b and c run agents against the fake model: each server holds its own secrets.
  const agents = { config: fakeBindings(fake), env: { HUTCH_AGENTS_DIR: AGENTS_DIR } };
  a = await startServer("hutch-pa-", {
    args: fleetArgs("a"),
    before: async (h) => {
      const init = await h.run(["cluster", "init", "--cluster", urls]);
      expect(init.code, init.stderr).toBe(0);
    },
  });
  servers.push(a);
  b = await startServer("hutch-pb-", { args: fleetArgs("b"), before: copyKey, ...agents });
  servers.push(b);
  c = await startServer("hutch-pc-", { args: fleetArgs("c"), before: copyKey, ...agents });
  servers.push(c);
}, 180_000);

afterAll(async () => {
  // A again (its second process, on its home): stopped first, its log kept until it has.
  const hung = a2 && (await stopServe(a2, join(a.home.home, "serve.log")));
  await stopServers(servers);
  await nats?.stop();
  await fake?.stop();
  if (hung) throw hung;
}, FLEET_TEARDOWN_MS);

describe("the fleet plane: failover, moves, cordons and drains", () => {
  test("node list shows the three servers, one leading; a cordoned server takes no new box, uncordoned it does", async () => {
    await waitFor(
      "a leader",
      async () => (JSON.parse(await ok(b.home, ["node", "list", "--json"])) as FleetNodeRow[]).some((r) => r.leader),
      30_000,
    );
    const rows = JSON.parse(await ok(b.home, ["node", "list", "--json"])) as FleetNodeRow[];
    expect(rows.map((r) => r.node.name)).toEqual(["a", "b", "c"]);
    expect(rows.filter((r) => r.leader).length).toBe(1);
    expect(await ok(c.home, ["node", "list"])).toContain("ready");
    await ok(c.home, ["node", "cordon", "b"]);
    expect((JSON.parse(await ok(a.home, ["node", "list", "--json"])) as FleetNodeRow[]).find((r) => r.node.name === "b")!.cordoned).toBe(
      true,
    );
    const asked = await b.home.run(["box", "create", "cord1", "--node", "b"]);
    expect(asked.code).not.toBe(0);
    expect(asked.stderr).toContain("no live server");
    // Placement leaves b out: four boxes made through b land on a and c.
    for (const n of ["cord2", "cord3"]) await ok(b.home, ["box", "create", n]);
    const placed = (await boxes(b.home)).filter((x) => x.name.startsWith("cord"));
    expect(placed.map((x) => x.server).sort()).not.toContain("b");
    await ok(a.home, ["node", "uncordon", "b"]);
    await ok(b.home, ["box", "create", "cord1", "--node", "b"]);
    for (const n of ["cord1", "cord2", "cord3"]) await ok(c.home, ["box", "delete", n]);
  }, 120_000);

  test("a server SIGKILLed with three restart-always boxes: they run on the others from their latest checkpoint, their sessions go on with box.moved; the old server back leaves one copy and writes nothing", async () => {
    const names = ["fo1", "fo2", "fo3"];
    const sessions: Record<string, string> = {};
    for (const n of names) {
      await ok(b.home, ["box", "create", n, "--node", "a", "--start", "--restart", "always", "--checkpoint-every", "10s"]);
      await ok(b.home, ["exec", n, "--", "sh", "-c", `echo kept-${n} > /workspace/kept.txt`]);
      sessions[n] = (JSON.parse(await ok(a.home, ["run", n, "--detach", "--json"])) as { id: string }).id;
    }
    const wrote = Date.now();
    // Each box's checkpoint taken after its file was written.
    await waitFor(
      "a checkpoint of each box after its file",
      async () => {
        const list = (await boxes(c.home)).filter((x) => names.includes(x.name));
        return list.length === 3 && list.every((x) => x.checkpoint?.last && Date.parse(x.checkpoint.last.at) > wrote);
      },
      90_000,
    );
    const before: Record<string, number> = {};
    for (const n of names) before[n] = (await events(c.home, sessions[n]!)).length;
    killA((await boxes(a.home)).filter((x) => names.includes(x.name)).map((x) => x.id));
    const t0 = Date.now();
    await waitFor(
      "the three boxes running on B and C",
      async () => {
        for (const h of [b.home, c.home]) {
          const list = (await boxes(h)).filter((x) => names.includes(x.name));
          if (!(list.length === 3 && list.every((x) => x.server !== "a" && x.state === "running"))) return false;
        }
        return true;
      },
      90_000,
    ).catch((err) => {
      for (const s of [b, c])
        console.log(
          s
            .log()
            .split("\n")
            .filter((l) => /fleet|box|reconcile|lease/i.test(l))
            .slice(-40)
            .join("\n"),
        );
      throw err;
    });
    const failover = Date.now() - t0;
    console.log(`failover: the three boxes ran on B and C ${(failover / 1000).toFixed(1)} s after A was killed`);
    for (const n of names) {
      // Their files from the checkpoint, exec answered through either server.
      expect((await ok(c.home, ["exec", n, "--", "cat", "/workspace/kept.txt"])).trim()).toBe(`kept-${n}`);
      const log = await events(b.home, sessions[n]!);
      expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
      const moved = log.filter((e) => e.kind === "box.moved");
      expect(moved.length).toBe(1);
      const m = moved[0]!.data as { from: string; to: string; reason: string; epoch: number; snapshot?: string };
      expect(m.from).toBe("a");
      expect(["b", "c"]).toContain(m.to);
      expect(m.reason).toBe("failover");
      expect(m.epoch).toBe(2);
      expect(m.snapshot).toMatch(/^snap_/);
      expect(moved[0]!.seq).toBeGreaterThan(before[n]!);
      // The session goes on: an annotation through the server that runs the box lands next.
      await ok(c.home, ["session", "annotate", sessions[n]!, `after failover ${n}`]);
    }
    const after: Record<string, SessionEvent[]> = {};
    for (const n of names) after[n] = await events(c.home, sessions[n]!);
    // A comes back on its home, port and name.
    const logPath = join(a.home.home, "serve.log");
    const fd = openSync(logPath, "a", 0o600);
    a2 = Bun.spawn([HUTCH, "serve", "--listen", `127.0.0.1:${a.port}`, ...fleetArgs("a")], {
      env: a.home.env,
      stdin: "ignore",
      stdout: fd,
      stderr: fd,
    });
    await waitFor("A serving again", () => readFileSync(logPath, "utf8").split("daemon ready").length > 2, 90_000);
    expect(readFileSync(logPath, "utf8")).toContain("superseded");
    // Settle: a few reconcile rounds on every server.
    await Bun.sleep(5000);
    for (const h of [a.home, b.home, c.home]) {
      const list = (await boxes(h)).filter((x) => names.includes(x.name));
      expect(list.map((x) => x.name).sort()).toEqual(names);
      expect(list.every((x) => x.server !== "a")).toBe(true);
    }
    // A holds none of them: no row, no directory.
    const aBoxes = existsSync(join(a.home.home, "boxes")) ? readdirSync(join(a.home.home, "boxes")) : [];
    if (aBoxes.length)
      console.log(
        readFileSync(logPath, "utf8")
          .split("\n")
          .filter((l) => /supersed|WARN|ERROR/.test(l))
          .join("\n"),
      );
    for (const x of (await boxes(b.home)).filter((y) => names.includes(y.name))) expect(aBoxes).not.toContain(x.id);
    for (const n of names) {
      const now = await events(b.home, sessions[n]!);
      expect(now.map((e) => e.seq)).toEqual(now.map((_, i) => i + 1));
      // Nothing A could have written: the only later events are the new server's checkpoints.
      const later = now.slice(after[n]!.length);
      expect(later.filter((e) => e.kind !== "checkpoint.created")).toEqual([]);
      expect(now.filter((e) => e.kind === "box.moved").length).toBe(1);
    }
  }, 300_000);

  test("box move of a process box: its files and its session continue on the other server, with box.moved", async () => {
    await ok(c.home, ["box", "create", "mv1", "--node", "b", "--start"]);
    await ok(c.home, ["exec", "mv1", "--", "sh", "-c", "echo moved-files > /workspace/m.txt"]);
    // Its policy, changed just before the move, goes with it: allowlist, unlisted hosts held, the approval wait.
    const policy = ["box", "policy", "mv1", "--json"];
    const set = JSON.parse(
      await ok(c.home, [...policy, "--allow", "example.com", "--unlisted", "ask", "--approval-timeout", "90s"]),
    ) as BoxPolicy;
    expect(set).toMatchObject({ allow: ["example.com"], unlisted: "ask", approvalTimeoutMs: 90_000 });
    const id = (JSON.parse(await ok(b.home, ["run", "mv1", "--detach", "--json"])) as { id: string }).id;
    const out = await ok(c.home, ["box", "move", "mv1", "--to", "c", "--json"]);
    const r = JSON.parse(out.trim().split("\n").at(-1)!) as { type: string; value: { from: string; to: string; epoch: number } };
    expect(r.type).toBe("result");
    expect(r.value).toMatchObject({ from: "b", to: "c", epoch: 2 });
    const list = (await boxes(b.home)).filter((x) => x.name === "mv1");
    expect(list.map((x) => x.server)).toEqual(["c"]);
    expect((await ok(b.home, ["exec", "mv1", "--", "cat", "/workspace/m.txt"])).trim()).toBe("moved-files");
    expect(JSON.parse(await ok(b.home, policy))).toEqual(set);
    await ok(b.home, ["session", "annotate", id, "after the move"]);
    const log = await events(c.home, id);
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
    const moved = log.filter((e) => e.kind === "box.moved").map((e) => e.data as { reason: string; from: string; to: string });
    expect(moved).toEqual([expect.objectContaining({ reason: "move", from: "b", to: "c" })]);
    expect(log.at(-1)!.kind).toBe("annotation.added");
    // A move to where it is, or to a server that is not live, is refused naming it.
    const same = await b.home.run(["box", "move", "mv1", "--to", "c"]);
    expect(same.code).not.toBe(0);
    expect(same.stderr).toContain("already runs on c");
    await ok(c.home, ["box", "delete", "mv1"]);
  }, 180_000);

  test("node drain empties a server while a client keeps exec-ing into one of its boxes through another server: every exec answers", async () => {
    for (const n of ["dr1", "dr2"]) await ok(c.home, ["box", "create", n, "--node", "b", "--start"]);
    let stop = false;
    const answers: { code: number; stderr: string }[] = [];
    const loop = (async () => {
      while (!stop) {
        const r = await c.home.run(["exec", "dr1", "--", "echo", "answered"]);
        answers.push({ code: r.code, stderr: r.stderr });
        if (r.code === 0) expect(r.stdout.trim()).toBe("answered");
      }
    })();
    await Bun.sleep(1500);
    const drained = await ok(c.home, ["node", "drain", "b", "--json"]);
    const res = JSON.parse(drained.trim().split("\n").at(-1)!) as { value: { moved: { box: string; to: string }[]; failed: unknown[] } };
    await Bun.sleep(1500);
    stop = true;
    await loop;
    expect(res.value.failed).toEqual([]);
    // Every box b ran goes: the two made for this test, and those the failover put there.
    expect(res.value.moved.map((m) => m.box)).toEqual(expect.arrayContaining(["dr1", "dr2"]));
    expect(res.value.moved.every((m) => m.to !== "b")).toBe(true);
    expect(answers.length).toBeGreaterThan(2);
    expect(answers.filter((x) => x.code !== 0)).toEqual([]);
    const rows = JSON.parse(await ok(c.home, ["node", "list", "--json"])) as FleetNodeRow[];
    const rb = rows.find((x) => x.node.name === "b")!;
    expect(rb.cordoned).toBe(true);
    expect(rb.boxes).toBe(0);
    await ok(c.home, ["node", "uncordon", "b"]);
    for (const n of ["dr1", "dr2"]) await ok(c.home, ["box", "delete", n]);
  }, 240_000);

  test("box move of a process box with a Claude Code session: the next turn on the other server resumes the agent's conversation", async () => {
    const secret = newSecrets().anthropic;
    for (const s of [b, c]) {
      expect((await s.home.run(["secret", "set", "anthropic"], { stdin: secret })).code).toBe(0);
      const install = await s.home.run(["agent", "install", "claude"]);
      expect(install.code, install.stderr).toBe(0);
    }
    await ok(c.home, ["box", "create", "cv1", "--node", "b", "--start", "--secret", "anthropic"]);
    const run = await b.home.run(["run", "cv1", "--agent", "claude", "--prompt", PROMPT, "--detach", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const id = (JSON.parse(run.stdout) as { id: string }).id;
    const idle = await b.home.run(["session", "wait", id, "--idle", "--json"]);
    expect(idle.code, idle.stdout + idle.stderr).toBe(0);
    await ok(a.home, ["box", "move", "cv1", "--to", "c"]);
    // The next turn, driven through c (which runs the box now): the fake sees turn 1 in its first request.
    fake.reset();
    await ok(c.home, ["session", "driver", "acquire", id]);
    await ok(c.home, ["session", "send", id, "create two.txt containing yo"]);
    const again = await c.home.run(["session", "wait", id, "--idle", "--json"]);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    const first = JSON.stringify(fake.modelCalls()[0]?.body ?? null);
    expect(first).toContain("create hello.txt containing hi");
    expect(first).toContain("create two.txt containing yo");
    expect((await ok(b.home, ["exec", "cv1", "--", "sh", "-c", "cat /workspace/hello.txt /workspace/two.txt"])).trim()).toBe("hiyo");
    const log = await events(b.home, id);
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
    expect(log.filter((e) => e.kind === "box.moved").length).toBe(1);
    await ok(c.home, ["box", "delete", "cv1"]);
  }, 300_000);
});
