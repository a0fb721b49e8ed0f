// test: vm
// An asleep VM box carried from one home to another through the fleet's store
// (host/src/fleet/carry.ts, on JetStream): one VM under tcg, booted once on
// home A, a loop started in it, put to sleep, carried out to the store,
// carried into home B, registered there and woken by B's daemon: the same
// process runs on, counting from where it was. Refusals along the way leave
// nothing behind: a home without the box's image, and a carry-in aborted
// part-way.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { CarriedBox, check } from "../../shared/src/index.ts";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { carryIn, carryOut, dropCarried, registerCarried } from "../../host/src/fleet/carry.ts";
import { initFleetStore, openFleetStore } from "../../host/src/fleet/store.ts";
import type { Progress, Store } from "../../host/src/snapshot/index.ts";
import { BoxStore } from "../../host/src/store/boxes.ts";
import { BrokerStore } from "../../host/src/store/broker.ts";
import { openDb } from "../../host/src/store/db.ts";
import { installTestImage, makeHome, qemuFor, waitFor, type Home } from "../helpers.ts";

let cluster: NatsCluster;
let a: Home;
let b: Home;
const conns: NatsConnection[] = [];
const stores: Store[] = [];
const dbs: Database[] = [];
let storeA: Store;
let storeB: Store;
let boxId: string;

async function ok(h: Home, args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout.trim();
}
const sh = (h: Home, cmd: string) => ok(h, ["exec", "mv", "--", "sh", "-c", cmd]);
const counter = async (h: Home) => Number(await sh(h, "cat /tmp/c"));
const state = async (h: Home) => (JSON.parse(await ok(h, ["box", "info", "mv", "--json"])) as { state: string }).state;

function db(h: Home): Database {
  const d = openDb(join(h.home, "hutch.db"));
  dbs.push(d);
  return d;
}

/** What a home's private directories hold of carries: nothing once one is done or refused. */
const leftovers = (home: string) =>
  existsSync(join(home, "tmp")) ? readdirSync(join(home, "tmp")).filter((n) => n.startsWith("carry-")) : [];

beforeAll(async () => {
  cluster = await startNatsCluster(1);
  a = makeHome("hutch-carrya-");
  b = makeHome("hutch-carryb-");
  for (const h of [a, b]) {
    Object.assign(h.env, { HUTCH_QEMU_ACCEL: "tcg" });
    await installTestImage(h);
  }
  // The fleet's store, made once from A; B holds the same key file, as an operator copies it.
  const keyA = join(a.home, "keys", "fleet.key");
  const keyB = join(b.home, "keys", "fleet.key");
  const ncA = await connect({ servers: cluster.urls });
  const ncB = await connect({ servers: cluster.urls });
  conns.push(ncA, ncB);
  await initFleetStore(ncA, a.home, keyA);
  mkdirSync(join(b.home, "keys"), { recursive: true, mode: 0o700 });
  copyFileSync(keyA, keyB);
  storeA = await openFleetStore(ncA, a.home, keyA);
  storeB = await openFleetStore(ncB, b.home, keyB);
  stores.push(storeA, storeB);
  await ok(a, ["box", "create", "mv", "--engine", "qemu", "--memory", "768M", "--start"]);
  boxId = (JSON.parse(await ok(a, ["box", "info", "mv", "--json"])) as { id: string }).id;
}, 900_000);

afterAll(async () => {
  for (const d of dbs) d.close();
  for (const s of stores) s.close();
  for (const nc of conns) await nc.close();
  // B first: both homes know the box's id, and a delete kills whatever QEMU carries it on this host.
  await b?.cleanup();
  await a?.cleanup();
  cluster?.stop();
}, 180_000);

describe("carrying an asleep VM box to another home", () => {
  test("its loop runs on in home B with the same pid, counting on from where it was", async () => {
    const pid = await sh(
      a,
      "MARK=carried-$((6*7)) sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 1; done' > /dev/null 2>&1 & echo $!",
    );
    await waitFor("the loop to count", async () => (await counter(a)) >= 2, 60_000);
    const before = await counter(a);
    expect((await ok(a, ["box", "sleep", "mv", "--json"])).includes('"asleep"')).toBe(true);
    // The loop's count when the box fell asleep is in the state; read it on B after the wake.
    const rowsA = new BoxStore(db(a));
    const row = rowsA.byId(boxId)!;
    expect(row.state).toBe("asleep");
    const reports: Progress[] = [];
    const t0 = performance.now();
    const ref = await carryOut({
      home: a.home,
      store: storeA,
      row,
      policy: new BrokerStore(db(a)).policy(boxId),
      progress: (p) => reports.push(p),
    });
    const outMs = performance.now() - t0;
    expect(check(CarriedBox, ref)).toBe(true);
    expect(ref.box).toEqual({ id: boxId, name: "mv", engine: "qemu" });
    expect(ref.qemu.accel).toBe("tcg");
    expect(ref.bytes).toBeGreaterThan(50 * 1024 * 1024);
    expect(reports.at(-1)?.done).toBe(true);
    // The source is untouched: asleep, its state and disk in place, nothing of the carry left.
    expect(await state(a)).toBe("asleep");
    expect(existsSync(join(a.home, "boxes", boxId, "sleep.state"))).toBe(true);
    expect(leftovers(a.home)).toEqual([]);

    // A home without the box's image build: refused naming the image and how to get it, nothing written.
    const bare = mkdtempSync(join(tmpdir(), "hutch-carryc-"));
    try {
      const refusal = await carryIn({ home: bare, store: storeB, ref }).then(
        () => null,
        (e: Error) => e,
      );
      expect(refusal?.message).toContain(`image "default"`);
      expect((refusal as Error & { hint?: string }).hint).toContain("hutch image import");
      expect(existsSync(join(bare, "boxes", boxId))).toBe(false);
      expect(leftovers(bare)).toEqual([]);
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }

    // Aborted part-way through the files: no directory for the box, no staging.
    const abort = new AbortController();
    const aborted = await carryIn({ home: b.home, store: storeB, ref, signal: abort.signal, progress: () => abort.abort() }).then(
      () => null,
      (e: Error) => e,
    );
    expect(aborted).not.toBeNull();
    expect(existsSync(join(b.home, "boxes", boxId))).toBe(false);
    expect(leftovers(b.home)).toEqual([]);

    const t1 = performance.now();
    const arrived = await carryIn({ home: b.home, store: storeB, ref });
    console.log(
      `carried ${ref.bytes} bytes (${ref.stored} stored): out ${Math.round(outMs)} ms, in ${Math.round(performance.now() - t1)} ms`,
    );
    expect(arrived.box.id).toBe(boxId);
    expect(arrived.dir).toBe(join(b.home, "boxes", boxId));
    // A carried box cannot land twice.
    await expect(carryIn({ home: b.home, store: storeB, ref })).rejects.toThrow(/has a directory here already/);
    const rowsB = new BoxStore(db(b));
    const registered = registerCarried(rowsB, arrived);
    expect([registered.id, registered.name, registered.state]).toEqual([boxId, "mv", "asleep"]);
    expect(registerCarried(rowsB, arrived).id).toBe(boxId);
    expect(await state(b)).toBe("asleep");

    expect((await b.run(["box", "wake", "mv"])).code).toBe(0);
    expect(await state(b)).toBe("running");
    expect(qemuFor(boxId).length).toBe(1);
    expect(readFileSync(join(b.home, "daemon.log"), "utf8")).not.toContain("woke cold");
    // The same process, with the environment it was started with: not a cold boot's process at the same pid.
    expect(await sh(b, `tr '\\0' '\\n' < /proc/${pid}/environ | grep '^MARK='`)).toBe("MARK=carried-42");
    const first = await counter(b);
    const later = await waitFor(
      "the loop to count on",
      async () => {
        const n = await counter(b);
        return n > first ? n : null;
      },
      60_000,
    );
    expect(later).toBeGreaterThan(first);
    // Its count went on from where it was: it stood still while asleep and carried, it did not start again.
    expect(first).toBeGreaterThanOrEqual(before);
    expect(first).toBeLessThan(before + 30);

    await dropCarried(storeB, ref);
    await expect(storeB.getSnapshot(ref.snapshot)).rejects.toThrow(/no snapshot/);
  }, 900_000);
});
