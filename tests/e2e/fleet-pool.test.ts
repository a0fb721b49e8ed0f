// Warm pools in a fleet: three `hutch serve --cluster` servers on one real
// 3-node NATS JetStream cluster. A pool set through one server is kept by
// every server (each its own box), `pool list` through any server shows all
// three, a create placed on one server claims that server's box under a
// fresh id, that server boots another, and a clear through a third server
// empties every server's pool. Process boxes: the claim's moves and the
// identity are the same code as a VM's (tests/e2e/vm-pool.test.ts boots VMs).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { type Home, waitFor } from "../helpers.ts";
import { type Server, startServer } from "../remote.ts";

let nats: NatsCluster;
let a: Server;
let b: Server;
let c: Server;

interface PoolJson {
  server: string;
  engine: string;
  image: string;
  wanted: number;
  ready: number;
}

async function ok(h: Home, args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

async function pools(through: Server): Promise<string[]> {
  const list = JSON.parse(await ok(through.home, ["pool", "list", "--json"])) as PoolJson[];
  return list.map((p) => `${p.server} ${p.engine}/${p.image} ${p.ready}/${p.wanted}`).sort();
}

/** The box directories in a server's home: its boxes, pool boxes included. */
const boxDirs = (s: Server) => (existsSync(join(s.home.home, "boxes")) ? readdirSync(join(s.home.home, "boxes")) : []);

beforeAll(async () => {
  nats = await startNatsCluster(3);
  const urls = nats.urls.join(",");
  const fleet = (node: string) => ["--cluster", urls, "--node", node];
  a = await startServer("hutch-pa-", {
    args: fleet("a"),
    before: async (h) => {
      expect((await h.run(["cluster", "init", "--cluster", urls])).code).toBe(0);
    },
  });
  const copyKey = (to: Home) => {
    mkdirSync(join(to.home, "keys"), { recursive: true, mode: 0o700 });
    copyFileSync(join(a.home.home, "keys", "fleet.key"), join(to.home, "keys", "fleet.key"));
    chmodSync(join(to.home, "keys", "fleet.key"), 0o600);
  };
  b = await startServer("hutch-pb-", { args: fleet("b"), before: copyKey });
  c = await startServer("hutch-pc-", { args: fleet("c"), before: copyKey });
}, 180_000);

afterAll(async () => {
  for (const s of [a, b, c]) await s?.stop();
  await nats?.stop();
});

describe("a warm pool in a fleet", () => {
  test("set through a, kept by every server: pool list through b shows each server's box ready", async () => {
    await ok(a.home, ["pool", "set", "default", "--engine", "process", "--warm", "1"]);
    const want = ["a process/default 1/1", "b process/default 1/1", "c process/default 1/1"];
    await waitFor("every server's pool to be ready", async () => JSON.stringify(await pools(b)) === JSON.stringify(want), 60_000);
    expect(await pools(c)).toEqual(want);
    for (const s of [a, b, c]) expect(boxDirs(s)).toHaveLength(1);
    // Not in the fleet's box directory, nor in any server's list.
    expect(JSON.parse(await ok(c.home, ["box", "list", "--json"]))).toEqual([]);
  }, 90_000);

  test("a create placed on c claims c's box under a fresh id, and c boots another", async () => {
    const pooled = boxDirs(c)[0]!;
    const box = JSON.parse(await ok(a.home, ["box", "create", "web", "--node", "c", "--json"])) as {
      id: string;
      state: string;
      server: string;
    };
    expect(box).toMatchObject({ state: "running", server: "c" });
    expect(box.id).not.toBe(pooled);
    // The pool box's directory became the new box's.
    expect(boxDirs(c)).toContain(box.id);
    expect(boxDirs(c)).not.toContain(pooled);
    expect(await ok(b.home, ["exec", "web", "--", "sh", "-c", "echo $HUTCH_BOX_ID; hostname"])).toBe(`${box.id}\nweb\n`);
    await waitFor("c's pool to be ready again", async () => (await pools(a)).includes("c process/default 1/1"), 60_000);
    expect(boxDirs(c)).toHaveLength(2);
    const listed = JSON.parse(await ok(b.home, ["box", "list", "--json"])) as { name: string; server: string }[];
    expect(listed.map((x) => `${x.name}@${x.server}`)).toEqual(["web@c"]);
  }, 90_000);

  test("a clear through b empties every server's pool; the claimed box stays", async () => {
    const out = JSON.parse(await ok(b.home, ["pool", "clear", "default", "--engine", "process", "--json"]));
    expect(out).toEqual({ image: "default", engine: "process", cleared: true });
    await waitFor("every pool box gone", () => boxDirs(a).length + boxDirs(b).length + boxDirs(c).length === 1, 60_000);
    expect(await pools(c)).toEqual([]);
    expect(await ok(c.home, ["exec", "web", "--", "true"])).toBe("");
  }, 90_000);
});
