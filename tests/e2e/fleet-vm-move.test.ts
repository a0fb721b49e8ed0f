// `hutch box move` of a VM box (issue 30), on two `hutch serve --cluster`
// servers and a real 3-node NATS JetStream cluster on loopback, QEMU under
// tcg: a counter loop running in the box on A goes on on B with the same pid
// and the same environment, counting on from where it was; the box's
// session logs box.moved with its programs kept; asked through B, which does
// not run the box, the move is carried out by A. Then the carry primitive the
// move is made of (host/src/fleet/carry.ts), on the same booted box: its
// refusals (a home without the box's image, a carry-in aborted part-way, a
// second landing) leave nothing behind.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { type Box, CarriedBox, check } from "../../shared/src/index.ts";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { carryIn, carryOut, dropCarried, registerCarried } from "../../host/src/fleet/carry.ts";
import { openFleetStore } from "../../host/src/fleet/store.ts";
import type { Progress } from "../../host/src/snapshot/index.ts";
import { BoxStore } from "../../host/src/store/boxes.ts";
import { BrokerStore } from "../../host/src/store/broker.ts";
import { openDb } from "../../host/src/store/db.ts";
import { events } from "../agent-turns.ts";
import { type Home, installTestImage, makeHome, waitFor } from "../helpers.ts";
import { type Server, startServer, stopServers, FLEET_TEARDOWN_MS } from "../remote.ts";

let nats: NatsCluster;
const servers: Server[] = [];
let a: Server;
let b: Server;

async function ok(h: Home, args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout.trim();
}
const sh = (h: Home, cmd: string) => ok(h, ["exec", "vm1", "--", "sh", "-c", cmd]);
const counter = async (h: Home) => Number(await sh(h, "cat /tmp/c"));

beforeAll(async () => {
  nats = await startNatsCluster(3);
  const urls = nats.urls.join(",");
  const env = { HUTCH_QEMU_ACCEL: "tcg" };
  a = await startServer("hutch-va-", {
    args: ["--cluster", urls, "--node", "a"],
    env,
    before: async (h) => {
      await installTestImage(h);
      const init = await h.run(["cluster", "init", "--cluster", urls]);
      expect(init.code, init.stderr).toBe(0);
    },
  });
  servers.push(a);
  b = await startServer("hutch-vb-", {
    args: ["--cluster", urls, "--node", "b"],
    env,
    before: async (h) => {
      await installTestImage(h);
      mkdirSync(join(h.home, "keys"), { recursive: true, mode: 0o700 });
      copyFileSync(join(a.home.home, "keys", "fleet.key"), join(h.home, "keys", "fleet.key"));
      chmodSync(join(h.home, "keys", "fleet.key"), 0o600);
    },
  });
  servers.push(b);
}, 300_000);

afterAll(async () => {
  // B's copy first: on one host both homes find the box's processes by its id.
  await b?.home.run(["box", "delete", "vm1"]).catch(() => undefined);
  await stopServers(servers).catch(() => undefined);
  await nats?.stop();
}, FLEET_TEARDOWN_MS);

describe("box move of a VM box", () => {
  test("a counter loop on A runs on on B with the same pid, counting on; its session logs box.moved with its programs kept", async () => {
    await ok(a.home, ["box", "create", "vm1", "--engine", "qemu", "--memory", "768M", "--node", "a", "--start"]);
    const pid = await sh(
      a.home,
      "MARK=moved-$((6*7)) sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 1; done' > /dev/null 2>&1 & echo $!",
    );
    const session = (JSON.parse(await ok(a.home, ["run", "vm1", "--detach", "--json"])) as { id: string }).id;
    await waitFor("the loop to count", async () => (await counter(a.home)) >= 2, 60_000);
    const before = await counter(a.home);
    const out = await ok(b.home, ["box", "move", "vm1", "--to", "b", "--json"]);
    const r = JSON.parse(out.split("\n").at(-1)!) as { type: string; value: { from: string; to: string; programsKept: boolean } };
    expect(r.type).toBe("result");
    expect(r.value).toMatchObject({ from: "a", to: "b", programsKept: true });
    const list = (JSON.parse(await ok(a.home, ["box", "list", "--json"])) as Box[]).filter((x) => x.name === "vm1");
    expect(list.map((x) => x.server)).toEqual(["b"]);
    // The same process, with the environment it was started with; the count goes on from where it was.
    expect(await sh(a.home, `tr '\\0' '\\n' < /proc/${pid}/environ | grep '^MARK='`)).toBe("MARK=moved-42");
    const first = await counter(b.home);
    expect(first).toBeGreaterThanOrEqual(before);
    await waitFor("the loop to count on, on B", async () => (await counter(b.home)) > first, 60_000);
    const log = await events(b.home, session);
    const moved = log.filter((e) => e.kind === "box.moved").map((e) => e.data as { reason: string; programsKept: boolean; to: string });
    expect(moved).toEqual([expect.objectContaining({ reason: "move", programsKept: true, to: "b" })]);
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
  }, 600_000);
});

/** What a home's private directories hold of carries: nothing once one is done or refused. */
const leftovers = (home: string) =>
  existsSync(join(home, "tmp")) ? readdirSync(join(home, "tmp")).filter((n) => n.startsWith("carry-")) : [];

describe("the carry a move is made of", () => {
  test("carried out of B asleep, into a home without its image, aborted part-way, or a second time: refused, nothing left behind", async () => {
    expect((await ok(b.home, ["box", "sleep", "vm1", "--json"])).includes('"asleep"')).toBe(true);
    const dbs: Database[] = [openDb(join(b.home.home, "hutch.db"))];
    const nc = await connect({ servers: nats.urls });
    const store = await openFleetStore(nc, b.home.home, join(b.home.home, "keys", "fleet.key"));
    const bare = mkdtempSync(join(tmpdir(), "hutch-carryc-"));
    const c = makeHome("hutch-carryd-");
    try {
      const row = new BoxStore(dbs[0]!).byName("vm1")!;
      expect(row.state).toBe("asleep");
      const reports: Progress[] = [];
      const ref = await carryOut({
        home: b.home.home,
        store,
        row,
        policy: new BrokerStore(dbs[0]!).policy(row.id),
        progress: (p) => reports.push(p),
      });
      expect(check(CarriedBox, ref)).toBe(true);
      expect(ref.box).toEqual({ id: row.id, name: "vm1", engine: "qemu" });
      expect(ref.qemu.accel).toBe("tcg");
      expect(ref.bytes).toBeGreaterThan(50 * 1024 * 1024);
      expect(reports.at(-1)?.done).toBe(true);
      // The source is untouched: asleep, its state in place, nothing of the carry left.
      const info = JSON.parse(await ok(b.home, ["box", "info", "vm1", "--json"])) as { state: string };
      expect(info.state).toBe("asleep");
      expect(existsSync(join(b.home.home, "boxes", row.id, "sleep.state"))).toBe(true);
      expect(leftovers(b.home.home)).toEqual([]);

      // A home without the box's image build: refused naming the image and how to get it, nothing written.
      const refusal = await carryIn({ home: bare, store, ref }).then(
        () => null,
        (e: Error) => e,
      );
      expect(refusal?.message).toContain(`image "default"`);
      expect((refusal as Error & { hint?: string }).hint).toContain("hutch image import");
      expect(existsSync(join(bare, "boxes", row.id))).toBe(false);
      expect(leftovers(bare)).toEqual([]);

      // Aborted part-way through the files: no directory for the box, no staging.
      await installTestImage(c);
      const abort = new AbortController();
      const aborted = await carryIn({ home: c.home, store, ref, signal: abort.signal, progress: () => abort.abort() }).then(
        () => null,
        (e: Error) => e,
      );
      expect(aborted).not.toBeNull();
      expect(existsSync(join(c.home, "boxes", row.id))).toBe(false);
      expect(leftovers(c.home)).toEqual([]);

      // Landed once, registered asleep (twice is the same row); a second landing is refused.
      const arrived = await carryIn({ home: c.home, store, ref });
      expect([arrived.box.id, arrived.dir]).toEqual([row.id, join(c.home, "boxes", row.id)]);
      await expect(carryIn({ home: c.home, store, ref })).rejects.toThrow(/has a directory here already/);
      dbs.push(openDb(join(c.home, "hutch.db")));
      const rows = new BoxStore(dbs[1]!);
      const registered = registerCarried(rows, arrived);
      expect([registered.id, registered.name, registered.state]).toEqual([row.id, "vm1", "asleep"]);
      expect(registerCarried(rows, arrived).id).toBe(row.id);

      await dropCarried(store, ref);
      await expect(store.getSnapshot(ref.snapshot)).rejects.toThrow(/no snapshot/);
    } finally {
      for (const d of dbs) d.close();
      store.close();
      await nc.close();
      rmSync(bare, { recursive: true, force: true });
      rmSync(c.home, { recursive: true, force: true });
    }
  }, 600_000);
});
