// A fleet: three `hutch serve --cluster` servers, each in its own home, on
// one real 3-node NATS JetStream cluster on loopback. A snapshot of a
// process box taken on A is listed, browsed, restored and forked on C, byte
// for byte; the node list shows the three live servers; a server whose key
// does not open the fleet's store, or whose cluster does not answer, refuses
// to start and names the fix; a snapshot while the cluster has lost its
// quorum fails naming the cluster, and the next one after it is back works.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { HUTCH, makeHome, sha256, type Home } from "../helpers.ts";
import { freePort, startServer, type Server } from "../remote.ts";

let nats: NatsCluster;
let urls: string;
const servers: Server[] = [];
let a: Server;
let c: Server;
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
  const fleet = (node: string) => ["--cluster", urls, "--node", node];
  a = await startServer("hutch-fa-", {
    args: fleet("a"),
    before: async (h) => {
      const init = await h.run(["cluster", "init", "--cluster", urls]);
      expect(init.code, init.stderr).toBe(0);
      expect(init.stdout).toContain("keys/fleet.key");
    },
  });
  servers.push(a);
  servers.push(await startServer("hutch-fb-", { args: fleet("b"), before: copyKey }));
  c = await startServer("hutch-fc-", { args: fleet("c"), before: copyKey });
  servers.push(c);
}, 180_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  for (const h of extra) await h.cleanup();
  await nats?.stop();
});

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
