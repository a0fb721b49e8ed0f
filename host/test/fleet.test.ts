// The fleet's store and node list on a real single JetStream server: init
// once and open with the key from any home, refusals that name their fix,
// and node entries that a second server under the same name cannot take.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { connectCluster } from "../src/fleet/connect.ts";
import { initFleetStore, openFleetStore } from "../src/fleet/store.ts";
import { listNodes, registerNode } from "../src/fleet/nodes.ts";
import { parseClusterUrls } from "../src/fleet/urls.ts";
import { type NatsCluster, startNatsCluster } from "./nats-cluster.ts";

let nats: NatsCluster;
let nc: NatsConnection;
const dirs: string[] = [];

function home(): string {
  const d = mkdtempSync(join(tmpdir(), "hutch-fleet-"));
  dirs.push(d);
  return d;
}

beforeAll(async () => {
  nats = await startNatsCluster(1);
  nc = await connectCluster(nats.urls, "fleet test");
}, 60_000);

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("the fleet store", () => {
  let a = "";
  let id = "";

  test("init makes the store once and writes the key; any home with the key opens it", async () => {
    a = home();
    const key = join(a, "keys", "fleet.key");
    id = await initFleetStore(nc, a, key);
    expect(readFileSync(key, "utf8")).toMatch(new RegExp(`^hutch-fleet-key-1 ${id} [0-9a-f]{64}\\n$`));

    const again = home();
    await expect(initFleetStore(nc, again, join(again, "keys", "fleet.key"))).rejects.toThrow("has a fleet snapshot store already");
    await expect(initFleetStore(nc, a, key)).rejects.toThrow("holds a fleet key already");

    const c = home();
    mkdirSync(join(c, "keys"), { mode: 0o700 });
    copyFileSync(key, join(c, "keys", "fleet.key"));
    chmodSync(join(c, "keys", "fleet.key"), 0o600);
    const store = await openFleetStore(nc, c, join(c, "keys", "fleet.key"));
    expect(store.info.id).toBe(id);
    store.close();
  });

  test("a missing, foreign, altered or readable key is refused with the fix", async () => {
    const c = home();
    const key = join(c, "fleet.key");
    await expect(openFleetStore(nc, c, key)).rejects.toThrow(`no fleet key at ${key}`);
    writeFileSync(key, `hutch-fleet-key-1 ${"0".repeat(32)} ${"ab".repeat(32)}\n`, { mode: 0o600 });
    await expect(openFleetStore(nc, c, key)).rejects.toThrow(`is the key of fleet store ${"0".repeat(32)}`);
    writeFileSync(key, `hutch-fleet-key-1 ${id} ${"ab".repeat(32)}\n`, { mode: 0o600 });
    const wrong = openFleetStore(nc, c, key);
    await expect(wrong).rejects.toThrow("does not open the snapshot store");
    await expect(wrong).rejects.toMatchObject({ code: "config", hint: expect.stringContaining("hutch cluster init") });
    chmodSync(key, 0o644);
    await expect(openFleetStore(nc, c, key)).rejects.toThrow("readable by other users");
  });
});

describe("nodes", () => {
  test("a node is listed while registered; another server cannot take its name, the same server can", async () => {
    const a = await registerNode(nc, { name: "a", listen: "https://127.0.0.1:1", server: "s1" });
    expect((await listNodes(nc)).map((n) => [n.name, n.listen])).toEqual([["a", "https://127.0.0.1:1"]]);
    await expect(registerNode(nc, { name: "a", listen: "https://127.0.0.1:2", server: "s2" })).rejects.toThrow('node "a" is already live');
    const again = await registerNode(nc, { name: "a", listen: "https://127.0.0.1:3", server: "s1" });
    expect((await listNodes(nc)).map((n) => n.listen)).toEqual(["https://127.0.0.1:3"]);
    await a.stop();
    await again.stop();
    expect(await listNodes(nc)).toEqual([]);
  });
});

test("--cluster takes nats:// URLs, comma-separated", () => {
  expect(parseClusterUrls("nats://10.0.0.1:4222, nats://h:4223")).toEqual(["nats://10.0.0.1:4222", "nats://h:4223"]);
  for (const bad of ["", "10.0.0.1:4222", "http://h:1", "nats://h"])
    expect(() => parseClusterUrls(bad)).toThrow("expected nats://HOST:PORT");
});

test("an unreachable cluster is named, with the next step", async () => {
  const err = await connectCluster(["nats://127.0.0.1:1"], "t").catch((e) => e);
  expect(err).toMatchObject({
    code: "unavailable",
    message: expect.stringContaining("cannot reach the NATS cluster at nats://127.0.0.1:1"),
  });
});
