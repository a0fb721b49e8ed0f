// A client's remote that lists two servers of one fleet (A and B, on a real
// 3-node NATS JetStream cluster on loopback): verbs work through it; once A
// is killed (SIGKILL), box list, exec into a box on B and a session watch
// started through A carry on through B, by the same remote, and the next
// verb goes to B first. Which server answered is said in debug logs only.
// Bad input: an unknown remote, a server of another fleet, a join string
// for another user, a server listed twice, removing one not listed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { RemoteListRow } from "../../shared/src/index.ts";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { type Home, waitFor } from "../helpers.ts";
import { joinClient, type Server, startServer, tokenOf, watchSession, stopServers, FLEET_TEARDOWN_MS } from "../remote.ts";

let nats: NatsCluster;
let a: Server;
let b: Server;
/** A server of no fleet: it does not know alice's token. */
let lone: Server;
let alice: Home & { join: string };
const servers: Server[] = [];

async function ok(h: Home, args: string[], stdin?: string): Promise<string> {
  const r = await h.run(args, stdin === undefined ? {} : { stdin });
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** A join string for alice, made by a server of the fleet (she exists there through the fleet's registry). */
async function joinVia(s: Server, user = "alice"): Promise<string> {
  return (await ok(s.home, ["token", "create", "--user", user])).trim();
}

const remotes = async () => JSON.parse(await ok(alice, ["remote", "list", "--json"])) as RemoteListRow[];

beforeAll(async () => {
  nats = await startNatsCluster(3);
  const urls = nats.urls.join(",");
  a = await startServer("hutch-ra-", {
    args: ["--cluster", urls, "--node", "a"],
    before: async (h) => {
      const init = await h.run(["cluster", "init", "--cluster", urls]);
      expect(init.code, init.stderr).toBe(0);
    },
  });
  servers.push(a);
  b = await startServer("hutch-rb-", {
    args: ["--cluster", urls, "--node", "b"],
    before: (h) => {
      mkdirSync(join(h.home, "keys"), { recursive: true, mode: 0o700 });
      copyFileSync(join(a.home.home, "keys", "fleet.key"), join(h.home, "keys", "fleet.key"));
      chmodSync(join(h.home, "keys", "fleet.key"), 0o600);
    },
  });
  servers.push(b);
  lone = await startServer("hutch-rl-");
  servers.push(lone);
  // alice is made through A; her remote "srv" names A.
  alice = await joinClient(a, "alice");
}, 180_000);

afterAll(async () => {
  await alice?.cleanup();
  await stopServers(servers);
  await nats?.stop();
}, FLEET_TEARDOWN_MS);

describe("a remote of two servers of a fleet", () => {
  test("add-server pins B and keeps the remote's one token; remote list shows both servers", async () => {
    const added = await alice.run(["remote", "add-server", "srv", "-"], { stdin: await joinVia(b) });
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain(`srv: added ${b.url}`);
    // The join string's own token is not kept: the output says which one to revoke.
    expect(added.stdout).toMatch(/token tok_[0-9a-z]{12} is not kept .*hutch token revoke tok_/);
    const [row] = await remotes();
    expect(row).toMatchObject({ name: "srv", url: a.url, user: "alice" });
    expect(row!.servers.map((s) => [s.url, s.active])).toEqual([
      [a.url, true],
      [b.url, false],
    ]);
    expect(row!.servers[1]!.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    const human = await ok(alice, ["remote", "list"]);
    expect(human).toContain(a.url);
    expect(human).toContain(b.url);
  }, 60_000);

  test("bad input: unknown remote, another fleet's server, another user's join, a server twice, removing one not listed", async () => {
    const unknown = await alice.run(["remote", "add-server", "nope", "-"], { stdin: await joinVia(b) });
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('no remote "nope"');

    const other = await alice.run(["remote", "add-server", "srv", "-"], { stdin: await lone.join("alice") });
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain(`${lone.url} is not a server of remote "srv"'s fleet`);
    expect(other.stderr).toContain("hutch remote add NAME JOIN");

    const bobs = await alice.run(["remote", "add-server", "srv", "-"], { stdin: await b.join("bob") });
    expect(bobs.code).not.toBe(0);
    expect(bobs.stderr).toContain(`the join string is for user bob; remote "srv" is alice's`);

    const twice = await alice.run(["remote", "add-server", "srv", "-"], { stdin: await joinVia(b) });
    expect(twice.code).not.toBe(0);
    expect(twice.stderr).toContain(`remote "srv" already lists ${b.url}`);

    const notListed = await alice.run(["remote", "rm-server", "srv", lone.url]);
    expect(notListed.code).not.toBe(0);
    expect(notListed.stderr).toContain(`remote "srv" lists no server ${lone.url}`);

    const noSuch = await alice.run(["box", "list"], { env: { HUTCH_REMOTE: "nope" } });
    expect(noSuch.code).not.toBe(0);
    expect(noSuch.stderr).toContain('no remote "nope"');

    // None of it changed the remote.
    expect((await remotes())[0]!.servers.map((s) => s.url)).toEqual([a.url, b.url]);
  }, 60_000);

  test("A killed: box list, exec into a box on B and a session watch carry on through B; the next verb goes to B first", async () => {
    const made = JSON.parse(await ok(alice, ["box", "create", "wb", "--node", "b", "--start", "--json"])) as { server?: string };
    expect(made.server).toBe("b");
    expect(await ok(alice, ["exec", "wb", "--", "echo", "before"])).toBe("before\n");
    const sid = (await ok(alice, ["run", "wb", "--detach", "--label", "failover"])).trim();
    await ok(alice, ["session", "annotate", sid, "through A"]);
    const watch = watchSession(alice, sid);
    const notes = () => watch.lines().flatMap((e) => (e.kind === "annotation.added" ? [(e.data as { text: string }).text] : []));
    await waitFor("the watch to show the first note", () => notes().includes("through A"), 30_000);

    a.proc.kill("SIGKILL");
    await a.proc.exited;

    const listed = await alice.run(["box", "list", "--json"]);
    expect(listed.code, listed.stderr).toBe(0);
    const boxes = JSON.parse(listed.stdout) as { name: string; server?: string }[];
    expect(boxes.find((x) => x.name === "wb")?.server).toBe("b");
    // Said in no verb's output: which server answered is the debug log's.
    expect(listed.stderr).toBe("");
    expect(await ok(alice, ["exec", "wb", "--", "echo", "after"])).toBe("after\n");
    await ok(alice, ["session", "annotate", sid, "through B"]);
    await waitFor("the watch to show the note made after A died", () => notes().includes("through B"), 40_000);
    expect(notes()).toEqual(["through A", "through B"]);
    watch.stop();

    // B answered, so B is tried first now.
    const [row] = await remotes();
    expect(row!.url).toBe(b.url);
    expect(row!.servers.find((s) => s.active)?.url).toBe(b.url);
    const debug = await alice.run(["--log-level", "debug", "session", "list", "--json"]);
    expect(debug.code, debug.stderr).toBe(0);
    expect(debug.stderr).toContain("remote answered");
    expect(debug.stderr).toContain(`server=${b.url}`);
    expect(debug.stderr).not.toContain(`server=${a.url}`);
  }, 180_000);

  test("rm-server removes A; the last server stays", async () => {
    expect(await ok(alice, ["remote", "rm-server", "srv", a.url])).toContain("1 left");
    const last = await alice.run(["remote", "rm-server", "srv", b.url]);
    expect(last.code).not.toBe(0);
    expect(last.stderr).toContain(`is remote "srv"'s only server`);
    expect(last.stderr).toContain("hutch remote rm srv");
    expect((await remotes())[0]!.servers.map((s) => s.url)).toEqual([b.url]);
    expect(tokenOf(alice.join)).toMatch(/^hutch_tok_/);
  }, 60_000);
});
