// A fleet: three `hutch serve --cluster` servers, each in its own home, on
// one real 3-node NATS JetStream cluster on loopback. A snapshot of a
// process box taken on A is listed, browsed, restored and forked on C, byte
// for byte; the node list shows the three live servers; a server whose key
// does not open the fleet's store, or whose cluster does not answer, refuses
// to start and names the fix; a snapshot while the cluster has lost its
// quorum fails naming the cluster, and the next one after it is back works.
// Session logs are the fleet's: a Claude Code turn (against the fake model)
// in a box on A, annotated through A, B and C, reads the same, event for
// event, through each server's log and live watch; writes through two
// servers at once land once each, gapless.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { decodeJoin, encodeJoin, type JoinToken, type SessionEvent } from "../../shared/src/index.ts";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { AGENTS_DIR, events, fakeBindings, newSecrets, PROMPT } from "../agent-turns.ts";
import { startFakeModel, type FakeModel } from "../fixtures/fake-model/index.ts";
import { HUTCH, makeHome, onTerminal, sha256, waitFor, type Home } from "../helpers.ts";
import { freePort, joinClient, startServer, tokenOf, type Server, watchSession, stopServers, FLEET_TEARDOWN_MS } from "../remote.ts";

let nats: NatsCluster;
let urls: string;
const servers: Server[] = [];
let a: Server;
let b: Server;
let c: Server;
let fake: FakeModel;
/** alice's client: one token, a remote per server (srv: A, b, c). */
let alice: Home | undefined;
let aliceToken = "";
const extra: Home[] = [];

async function ok(h: Home, args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** An op's --json output: NDJSON progress, its result last. */
function result(out: string): Record<string, unknown> {
  const last = JSON.parse(out.trim().split("\n").at(-1)!) as { type: string; value: Record<string, unknown> };
  expect(last.type).toBe("result");
  return last.value;
}

/** The fleet key A's home holds, copied where a server looks for it. */
function copyKey(to: Home): void {
  mkdirSync(join(to.home, "keys"), { recursive: true, mode: 0o700 });
  copyFileSync(join(a.home.home, "keys", "fleet.key"), join(to.home, "keys", "fleet.key"));
  chmodSync(join(to.home, "keys", "fleet.key"), 0o600);
}

/** `hutch serve --cluster` that is expected to refuse: its exit code and stderr. */
async function refusedServe(h: Home, args: string[]): Promise<{ code: number; stderr: string }> {
  const proc = Bun.spawn([HUTCH, "serve", "--listen", `127.0.0.1:${freePort()}`, ...args], {
    env: h.env,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stderr };
}

beforeAll(async () => {
  nats = await startNatsCluster(3);
  urls = nats.urls.join(",");
  fake = await startFakeModel();
  // Labels placement reads: A in the east, B and C in the west, C with a GPU.
  const labels: Record<string, string[]> = { a: ["zone=east"], b: ["zone=west"], c: ["zone=west", "gpu=yes"] };
  const fleet = (node: string) => ["--cluster", urls, "--node", node, ...labels[node]!.flatMap((l) => ["--label", l])];
  // A write without a quorum fails after 5 s here, not the default 30: the quorum test waits that long.
  const timeout = { HUTCH_CLUSTER_WRITE_TIMEOUT_MS: "5000" };
  a = await startServer("hutch-fa-", {
    args: fleet("a"),
    config: fakeBindings(fake),
    env: { HUTCH_AGENTS_DIR: AGENTS_DIR, ...timeout },
    before: async (h) => {
      const init = await h.run(["cluster", "init", "--cluster", urls]);
      expect(init.code, init.stderr).toBe(0);
      expect(init.stdout).toContain("keys/fleet.key");
    },
  });
  servers.push(a);
  b = await startServer("hutch-fb-", { args: fleet("b"), env: timeout, before: copyKey });
  servers.push(b);
  c = await startServer("hutch-fc-", { args: fleet("c"), env: timeout, before: copyKey });
  servers.push(c);
}, 180_000);

afterAll(async () => {
  await stopServers(servers);
  for (const h of extra) await h.cleanup();
  await nats?.stop();
  fake?.stop();
}, FLEET_TEARDOWN_MS);

describe("a fleet of hutch servers on NATS JetStream", () => {
  let snap = "";
  let blobSum = "";

  test("a snapshot taken on A is listed, browsed, restored and forked on C, byte for byte", async () => {
    await ok(a.home, ["box", "create", "w", "--start"]);
    await ok(a.home, [
      "exec",
      "w",
      "--",
      "sh",
      "-c",
      "mkdir -p /workspace/src && head -c 300000 /dev/urandom > /workspace/src/blob.bin && echo fleet > /workspace/note.txt",
    ]);
    const original = (await a.home.run(["exec", "w", "--", "cat", "/workspace/src/blob.bin"])).out;
    expect(original.length).toBe(300000);
    blobSum = sha256(original);
    const made = result(await ok(a.home, ["snapshot", "create", "w", "--label", "on-a", "--json"]));
    snap = (made.snapshot as { id: string }).id;
    expect(snap).toMatch(/^snap_/);
    // Nothing of it in A's home: the fleet's store is on the cluster, the home's own store never made.
    expect(existsSync(join(a.home.home, "snapshots"))).toBe(false);

    const listed = JSON.parse(await ok(c.home, ["snapshot", "list", "--json"])) as { id: string; label?: string; files: number }[];
    expect(listed.map((s) => s.id)).toEqual([snap]);
    expect(listed[0]).toMatchObject({ label: "on-a", files: 2 });

    const browsed = JSON.parse(await ok(c.home, ["snapshot", "browse", snap, "workspace/src", "--json"])) as {
      entries: { name: string; type: string; size?: number }[];
    };
    expect(browsed.entries).toEqual([expect.objectContaining({ name: "blob.bin", type: "file", size: 300000 })]);

    await ok(c.home, ["box", "create", "r", "--start"]);
    const restored = result(await ok(c.home, ["snapshot", "restore", "r", snap, "--json"]));
    const into = (restored.into as string[])[0]!;
    const back = (await c.home.run(["exec", "r", "--", "cat", `${into}/workspace/src/blob.bin`])).out;
    expect(sha256(back)).toBe(blobSum);

    // A fork is filled, then left stopped (as on one server).
    await ok(c.home, ["box", "create", "f", "--from", snap]);
    await ok(c.home, ["box", "start", "f"]);
    const forked = await c.home.run(["exec", "f", "--", "sh", "-c", "cat /workspace/note.txt; sha256sum < /workspace/src/blob.bin"]);
    expect(forked.stdout).toBe(`fleet\n${blobSum}  -\n`);
  }, 180_000);

  test("the node list shows the three live servers and where they serve", async () => {
    const nodes = JSON.parse(await ok(c.home, ["cluster", "nodes", "--cluster", urls, "--json"])) as {
      name: string;
      listen: string;
      seen: number;
    }[];
    expect(nodes.map((n) => [n.name, n.listen])).toEqual(servers.map((s, i) => [["a", "b", "c"][i]!, s.url]));
    for (const n of nodes) expect(Date.now() - n.seen).toBeLessThan(15_000);
    const human = await ok(a.home, ["cluster", "nodes", "--cluster", urls]);
    expect(human).toContain("NODE");
    expect(human).toContain(c.url);
  });

  test("a session on A, its agent turn and annotations through A, B and C: each server's log and live watch show the same events in the same order", async () => {
    expect((await a.home.run(["secret", "set", "anthropic"], { stdin: newSecrets().anthropic })).code).toBe(0);
    const install = await a.home.run(["agent", "install", "claude"]);
    expect(install.code, install.stderr).toBe(0);
    const run = await a.home.run(["run", "--agent", "claude", "--prompt", PROMPT, "--detach", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const id = (JSON.parse(run.stdout) as { id: string }).id;
    // Live watchers on B and C from the start: everything A's box logs reaches them through the fleet's log.
    const watchers = [b, c].map((s) => watchSession(s.home, id));
    const idle = await a.home.run(["session", "wait", id, "--idle", "--json"]);
    expect(idle.code, idle.stdout + idle.stderr).toBe(0);
    for (const [s, text] of [
      [a, "from a"],
      [b, "from b"],
      [c, "from c"],
    ] as const) {
      const r = await s.home.run(["session", "annotate", id, text]);
      expect(r.code, r.stderr).toBe(0);
    }
    const logged = await events(a.home, id);
    const key = (list: SessionEvent[]) => list.map((e) => JSON.stringify([e.seq, e.at, e.actor, e.kind, e.data]));
    expect(key(await events(b.home, id))).toEqual(key(logged));
    expect(key(await events(c.home, id))).toEqual(key(logged));
    expect(logged.map((e) => e.seq)).toEqual(logged.map((_, i) => i + 1));
    expect(logged.some((e) => e.kind === "tool.called")).toBe(true);
    expect(logged.filter((e) => e.kind === "annotation.added").map((e) => (e.data as { text: string }).text)).toEqual([
      "from a",
      "from b",
      "from c",
    ]);
    for (const w of watchers) {
      await waitFor(`a watcher to show the ${logged.length} events`, () => w.lines().length >= logged.length, 30_000);
      w.stop();
      expect(key(w.lines())).toEqual(key(logged));
    }
    // Driving is the box's server's: B forwards the input to A, which answers as it would itself (nobody drives it).
    const send = await b.home.run(["session", "send", id, "hello"]);
    expect(send.code).not.toBe(0);
    expect(send.stderr).toContain(`nobody drives session ${id}`);
    expect((await events(a.home, id)).length).toBe(logged.length);
    // B and C list it, with its summary folded from the same log.
    const listed = JSON.parse(await ok(c.home, ["session", "list", "--json"])) as { id: string; lastSeq: number }[];
    expect(listed.find((s) => s.id === id)?.lastSeq).toBe(logged.length);
  }, 300_000);

  test("annotations written through B and C at once land once each, seqs gapless, the same on every server", async () => {
    // A shell session in A's box: its terminal's few events and the annotations share one log.
    const made = JSON.parse(await ok(a.home, ["run", "w", "--detach", "--json"])) as { id: string };
    const id = made.id;
    const each = 15;
    const writes = [b, c].flatMap((s, k) =>
      Array.from({ length: each }, (_, i) => s.home.run(["session", "annotate", id, `s${k}-${i}`, "--json"])),
    );
    const answers = await Promise.all(writes);
    for (const r of answers) expect(r.code, r.stderr).toBe(0);
    const seqs = answers.map((r) => (JSON.parse(r.stdout) as { seq: number }).seq).sort((x, y) => x - y);
    const logged = await events(c.home, id);
    // Every write answered with its own seq, and each is the annotation it wrote.
    expect(new Set(seqs).size).toBe(2 * each);
    expect(logged.filter((e) => e.kind === "annotation.added").map((e) => e.seq)).toEqual(seqs);
    const texts = logged.filter((e) => e.kind === "annotation.added").map((e) => (e.data as { text: string }).text);
    expect(texts.length).toBe(2 * each);
    expect(new Set(texts).size).toBe(2 * each);
    expect(logged.map((e) => e.seq)).toEqual(logged.map((_, i) => i + 1));
    const notes = (list: SessionEvent[]) =>
      list.filter((e) => e.kind === "annotation.added").map((e) => `${e.seq}:${e.actor.id}:${JSON.stringify(e.data)}`);
    // A batch bigger than one NATS message is refused at once, naming the limit, and stores nothing.
    const big = await fetch(`http://localhost/v1/sessions/${id}/events`, {
      unix: join(b.home.home, "hutch.sock"),
      method: "POST",
      headers: { "x-hutch-client": "cli", "content-type": "application/json" },
      body: JSON.stringify({
        events: Array.from({ length: 6000 }, (_, i) => ({ kind: "annotation.added", data: { text: `${i} ${"x".repeat(200)}` } })),
      }),
    });
    expect(big.status).toBe(400);
    expect(((await big.json()) as { error: { message: string } }).error.message).toContain("-byte message the fleet's NATS cluster takes");
    for (const s of [a, b]) {
      const there = await events(s.home, id);
      expect(there.map((e) => e.seq)).toEqual(there.map((_, i) => i + 1));
      expect(notes(there)).toEqual(notes(logged));
    }
  }, 120_000);

  test("one user, one token for the fleet: a box and an agent turn through A, its log and watch through B and C", async () => {
    // alice is made on A, her token through A; B knows both through the fleet's registry.
    const client = await joinClient(a, "alice");
    alice = client;
    const token = tokenOf(client.join);
    aliceToken = token;
    // A remote per server, each with alice's one token (a join string carries its server's URL and certificate).
    for (const s of [b, c]) {
      const minted = await s.home.run(["token", "create", "--user", "alice", "--json"]);
      expect(minted.code, minted.stderr).toBe(0);
      const there = decodeJoin((JSON.parse(minted.stdout) as { join: string }).join) as JoinToken;
      const join = encodeJoin({ ...there, token });
      const added = await client.run(["remote", "add", s === b ? "b" : "c", "-"], { stdin: join });
      expect(added.code, added.stderr).toBe(0);
    }
    const via = (remote: string) => ({ env: { HUTCH_REMOTE: remote } });
    expect((await client.run(["secret", "set", "anthropic"], { stdin: newSecrets().anthropic })).code).toBe(0);
    const run = await client.run(["run", "--agent", "claude", "--prompt", PROMPT, "--detach", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const id = (JSON.parse(run.stdout) as { id: string }).id;
    const idle = await client.run(["session", "wait", id, "--idle", "--json"]);
    expect(idle.code, idle.stdout + idle.stderr).toBe(0);
    const watcher = watchSession(client, id, "c");
    for (const remote of ["b", "c"]) {
      const r = await client.run(["session", "annotate", id, `alice via ${remote}`], via(remote));
      expect(r.code, r.stderr).toBe(0);
    }
    const logOf = async (remote: string) => {
      const r = await client.run(["session", "log", id, "--json"], via(remote));
      expect(r.code, r.stderr).toBe(0);
      return r.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as SessionEvent);
    };
    const logs = await Promise.all(["srv", "b", "c"].map(logOf));
    const key = (list: SessionEvent[]) => list.map((e) => JSON.stringify([e.seq, e.at, e.actor, e.kind, e.data]));
    expect(key(logs[1]!)).toEqual(key(logs[0]!));
    expect(key(logs[2]!)).toEqual(key(logs[0]!));
    expect(logs[0]!.some((e) => e.kind === "tool.called")).toBe(true);
    expect(logs[0]!.filter((e) => e.kind === "annotation.added").map((e) => e.actor)).toEqual([
      { kind: "user", id: "alice" },
      { kind: "user", id: "alice" },
    ]);
    await waitFor("the watch through C to show every event", () => watcher.lines().length >= logs[0]!.length, 30_000);
    watcher.stop();
    expect(key(watcher.lines())).toEqual(key(logs[0]!));
  }, 300_000);

  test("through a server that does not run the box: exec with its exit code, 64 MiB byte for byte, stdin, box info, a terminal reattached through another server, cp; alice's exec through C", async () => {
    expect((await b.home.run(["exec", "w", "--", "sh", "-c", "exit 7"])).code).toBe(7);
    await ok(a.home, ["exec", "w", "--", "sh", "-c", "head -c 67108864 /dev/urandom > /workspace/big"]);
    const sum = (await ok(a.home, ["exec", "w", "--", "sha256sum", "/workspace/big"])).split(" ")[0]!;
    const big = await b.home.run(["exec", "w", "--", "cat", "/workspace/big"]);
    expect(big.code, big.stderr).toBe(0);
    expect(big.out.length).toBe(67108864);
    expect(sha256(big.out)).toBe(sum);
    const info = JSON.parse(await ok(c.home, ["box", "info", "w", "--json"])) as { name: string; state: string };
    expect(info).toMatchObject({ name: "w", state: "running" });
    // stdin goes through too.
    const echoed = await b.home.run(["exec", "w", "--", "cat"], { stdin: "through b\n" });
    expect(echoed.code, echoed.stderr).toBe(0);
    expect(echoed.stdout).toBe("through b\n");
    const her = alice;
    if (!her) throw new Error("the test before makes alice's client");
    const boxes = JSON.parse((await her.run(["box", "list", "--json"])).stdout) as { name: string }[];
    const mine = await her.run(["exec", boxes[0]!.name, "--", "cat", "/workspace/hello.txt"], { env: { HUTCH_REMOTE: "c" } });
    expect(mine.code, mine.stderr).toBe(0);
    expect(mine.stdout).toContain("hi");
    // A terminal through B: type, drop the client, reattach through C, the loop still running.
    const t1 = onTerminal(b.home, ["exec", "--tty", "w", "--", "sh"]);
    await t1.until("$ ");
    t1.type("i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.3; done\n");
    await t1.until("tick-3");
    t1.proc.kill("SIGKILL");
    await t1.proc.exited;
    // The box's terminals as C lists them (A's: a shell session's is there too); ours is the `sh`.
    const ptys = (JSON.parse(await ok(c.home, ["pty", "list", "w", "--json"])) as { id: string; argv: string[] }[]).filter(
      (p) => p.argv.join(" ") === "sh",
    );
    expect(ptys.length).toBe(1);
    const seen = Math.max(...[...t1.text().matchAll(/tick-(\d+)/g)].map((m) => Number(m[1])));
    const t2 = onTerminal(c.home, ["pty", "attach", "w", ptys[0]!.id]);
    await t2.until(new RegExp(`tick-(${seen + 4}|${seen + 5}|${seen + 6})`));
    t2.type("\x03");
    t2.type("exit\n");
    await t2.proc.exited;
    // cp both ways through C.
    const local = join(c.home.home, "up.txt");
    writeFileSync(local, "copied through c\n");
    await ok(c.home, ["cp", local, "w:/workspace/up.txt"]);
    expect(await ok(a.home, ["exec", "w", "--", "cat", "/workspace/up.txt"])).toBe("copied through c\n");
    await ok(c.home, ["cp", "w:/workspace/up.txt", join(c.home.home, "down.txt")]);
    expect(readFileSync(join(c.home.home, "down.txt"), "utf8")).toBe("copied through c\n");
    // Another user's box through C is answered as missing, as on A.
    const theirs = await her.run(["exec", "w", "--", "true"], { env: { HUTCH_REMOTE: "c" } });
    expect(theirs.code).not.toBe(0);
    expect(theirs.stderr).toContain('no box named "w"');
  }, 180_000);

  test("boxes made through one server spread by free memory; --on and --node place them; a quota stops a user's fourth box", async () => {
    const made: string[] = [];
    for (const name of ["p1", "p2", "p3"]) {
      const box = JSON.parse(await ok(b.home, ["box", "create", name, "--memory", "4G", "--json"])) as { server?: string };
      made.push(box.server ?? "?");
    }
    // Every server has the same memory here: each 4 GiB box goes where the least is given out, so one on each.
    expect(made.toSorted()).toEqual(["a", "b", "c"]);
    const gpu = JSON.parse(await ok(a.home, ["box", "create", "g1", "--on", "gpu=yes", "--json"])) as { server?: string };
    expect(gpu.server).toBe("c");
    const pinned = JSON.parse(await ok(c.home, ["box", "create", "n1", "--node", "a", "--json"])) as { server?: string };
    expect(pinned.server).toBe("a");
    const none = await b.home.run(["box", "create", "x1", "--on", "zone=north"]);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain("no live server of the fleet takes this box (--on zone=north, engine process)");
    expect(none.stderr).toContain("a [zone=east]");
    // Deleted through B wherever they run.
    for (const name of ["p1", "p2", "p3", "g1", "n1"]) await ok(b.home, ["box", "delete", name]);

    // bob may hold three boxes, counted over the whole fleet.
    const bob = await joinClient(a, "bob");
    extra.push(bob);
    await ok(c.home, ["user", "quota", "bob", "--boxes", "3"]);
    const users = JSON.parse(await ok(a.home, ["user", "list", "--json"])) as { name: string; quota?: { boxes?: number } }[];
    expect(users.find((u) => u.name === "bob")?.quota).toEqual({ boxes: 3 });
    const where: string[] = [];
    for (const name of ["q1", "q2", "q3"]) {
      const r = await bob.run(["box", "create", name, "--memory", "4G", "--json"]);
      expect(r.code, r.stderr).toBe(0);
      where.push((JSON.parse(r.stdout) as { server?: string }).server ?? "?");
    }
    expect(new Set(where).size).toBeGreaterThan(1);
    const fourth = await bob.run(["box", "create", "q4"]);
    expect(fourth.code).not.toBe(0);
    expect(fourth.stderr).toContain("user bob's quota is 3 boxes, and they hold 3");
    expect(fourth.stderr).toContain("hutch user quota bob --boxes N");
    await ok(bob, ["box", "delete", "q1"]);
    const again = await bob.run(["box", "create", "q4"]);
    expect(again.code, again.stderr).toBe(0);
    for (const name of ["q2", "q3", "q4"]) await ok(bob, ["box", "delete", name]);
  }, 180_000);

  test("fleet events: every server's joins and its boxes' transitions, in one order through any server; --from resumes, --follow follows", async () => {
    type Ev = { seq: number; kind: string; node: string; box?: { name: string; state: string } };
    const read = async (h: Home) =>
      (await ok(h, ["fleet", "events", "--json"]))
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Ev);
    // The deletes of the test before are told as their servers finish them.
    const all = await waitFor("p1's deletion to be told", async () => {
      const got = await read(c.home);
      return got.filter((e) => e.box?.name === "p1").at(-1)?.kind === "box.deleted" ? got : null;
    });
    expect(all.map((e) => e.seq)).toEqual(all.map((e) => e.seq).toSorted((x, y) => x - y));
    for (const n of ["a", "b", "c"]) expect(all.some((e) => e.kind === "node.joined" && e.node === n)).toBe(true);
    const p1 = all.filter((e) => e.box?.name === "p1").map((e) => e.kind);
    expect(p1[0]).toBe("box.created");
    expect(p1.at(-1)).toBe("box.deleted");
    // The same events through another server.
    const viaA = (await ok(a.home, ["fleet", "events", "--json"]))
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Ev);
    expect(viaA.slice(0, all.length).map((e) => e.seq)).toEqual(all.map((e) => e.seq));
    // Follow from after the last one: a box made now is told.
    const next = all.at(-1)!.seq + 1;
    const follow = b.home.spawn(["fleet", "events", "--from", String(next), "--follow", "--json"]);
    let out = "";
    void (async () => {
      for await (const chunk of follow.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
    })();
    await ok(a.home, ["box", "create", "ev1"]);
    const lines = () =>
      out
        .slice(0, out.lastIndexOf("\n") + 1)
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Ev);
    await waitFor(
      "the follower to tell ev1's creation",
      () => lines().some((e) => e.kind === "box.created" && e.box?.name === "ev1"),
      20_000,
    );
    follow.kill();
    // It started where it was told to: nothing before `next`.
    expect(Math.min(...lines().map((e) => e.seq))).toBeGreaterThanOrEqual(next);
    await ok(a.home, ["box", "delete", "ev1"]);
    // A remote user without an admin token may not read the fleet's events.
    const her = alice;
    if (!her) throw new Error("the test before makes alice's client");
    const refused = await her.run(["fleet", "events"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("/v1/fleet/events is the server admin's");
  }, 120_000);

  test("box list through any server shows the fleet's boxes and the server each runs on; a remote user sees hers only; her token revoked on C is refused on A", async () => {
    const lists = await Promise.all(
      servers.map(async (s) =>
        (JSON.parse(await ok(s.home, ["box", "list", "--json"])) as { name: string; server?: string; id: string }[])
          .map((x) => `${x.name}@${x.server}`)
          .sort(),
      ),
    );
    expect(lists[1]).toEqual(lists[0]!);
    expect(lists[2]).toEqual(lists[0]!);
    // w was the fleet's first box (placed by name among equals); r and f went where placement put them.
    expect(lists[0]).toContain("w@a");
    for (const name of ["r", "f"]) expect(lists[0]!.some((x) => x.startsWith(`${name}@`))).toBe(true);
    const human = await ok(b.home, ["box", "list"]);
    expect(human).toContain("SERVER");
    // alice's remote through B: only her box (made through A by her run), with its server.
    const her = alice;
    if (!her) throw new Error("the test before makes alice's client");
    const hers = JSON.parse((await her.run(["box", "list", "--json"], { env: { HUTCH_REMOTE: "b" } })).stdout) as {
      server?: string;
      name: string;
    }[];
    expect(hers.length).toBe(1);
    expect(hers[0]!.server).toBe("a");
    // A box deleted on C leaves every server's list.
    await ok(c.home, ["box", "delete", "f"]);
    await waitFor("B's list to lose f", async () => !(await ok(b.home, ["box", "list", "--json"])).includes('"name":"f"'));
    // Revoked through C's admin socket: A refuses it at once.
    const tokenId = /^hutch_(tok_[0-9a-z]{12})_/.exec(aliceToken)![1]!;
    expect((await c.home.run(["token", "revoke", tokenId])).code).toBe(0);
    await waitFor("A to refuse the revoked token", async () => {
      const r = await her.run(["session", "list"]);
      return r.code !== 0 && r.stderr.includes("was revoked");
    });
  }, 120_000);

  test("a server whose key does not open the fleet's store refuses to start, naming the fix", async () => {
    const wrong = makeHome("hutch-fw-");
    extra.push(wrong);
    // The fleet store's id with another master key: the store's config does not pass its MAC check.
    const [tag, id] = readFileSync(join(a.home.home, "keys", "fleet.key"), "utf8").split(" ");
    mkdirSync(join(wrong.home, "keys"), { mode: 0o700 });
    writeFileSync(join(wrong.home, "keys", "fleet.key"), `${tag} ${id} ${"ab".repeat(32)}\n`, { mode: 0o600 });
    const r = await refusedServe(wrong, ["--cluster", urls, "--node", "w"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("does not open the snapshot store");
    expect(r.stderr).toContain("hutch cluster init");

    const none = await refusedServe(wrong, ["--cluster", urls, "--node", "w", "--fleet-key", join(wrong.home, "nope.key")]);
    expect(none.code).toBe(3);
    expect(none.stderr).toContain("no fleet key at");
    expect(none.stderr).toContain("next: copy keys/fleet.key");
    expect(wrong.daemonPid()).toBeNull();
  }, 120_000);

  test("an unreachable cluster fails the start, naming its URL", async () => {
    const lost = makeHome("hutch-fu-");
    extra.push(lost);
    const r = await refusedServe(lost, ["--cluster", "nats://127.0.0.1:1", "--node", "u"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("cannot reach the NATS cluster at nats://127.0.0.1:1");
    expect(r.stderr).toContain("next: start its nats-server nodes");
    // Every interface is no address for the other servers to forward to: refused without --advertise, before anything starts.
    const wild = Bun.spawnSync([HUTCH, "serve", "--listen", "0.0.0.0:1", "--cluster", "nats://127.0.0.1:1", "--node", "u"], {
      env: lost.env,
    });
    expect(wild.exitCode).not.toBe(0);
    expect(wild.stderr.toString()).toContain("--listen 0.0.0.0:1 is every interface");
    expect(wild.stderr.toString()).toContain("add --advertise https://");
  }, 60_000);

  test("without a quorum a snapshot fails naming the cluster; with it back the store is whole", async () => {
    await nats.kill(1);
    await nats.kill(2);
    const r = await a.home.run(["snapshot", "create", "w"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`the NATS cluster "${nats.name}" did not acknowledge`);
    await nats.restart(1);
    await nats.restart(2);
    await nats.ready(60_000);
    const again = result(await ok(a.home, ["snapshot", "create", "w", "--json"]));
    const next = (again.snapshot as { id: string }).id;
    const listed = JSON.parse(await ok(c.home, ["snapshot", "list", "--json"])) as { id: string }[];
    expect(listed.map((s) => s.id)).toEqual([snap, next]);
    const check = result(await ok(c.home, ["snapshot", "check", "--read-data", "--json"]));
    expect(check).toMatchObject({ ok: true, errors: [] });
  }, 240_000);
});
