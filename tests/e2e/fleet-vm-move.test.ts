// `hutch box move` of a VM box (issue 30), on two `hutch serve --cluster`
// servers and a real 3-node NATS JetStream cluster on loopback, QEMU under
// tcg: a counter loop running in the box on A goes on on B with the same pid
// and the same environment, counting on from where it was; the box's
// session logs box.moved with its programs kept; asked through B, which does
// not run the box, the move is carried out by A.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Box } from "../../shared/src/index.ts";
import { type NatsCluster, startNatsCluster } from "../../host/test/nats-cluster.ts";
import { events } from "../agent-turns.ts";
import { type Home, installTestImage, waitFor } from "../helpers.ts";
import { type Server, startServer } from "../remote.ts";

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
  for (const s of servers) await s.stop().catch(() => undefined);
  await nats?.stop();
});

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
