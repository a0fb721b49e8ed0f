// Forks through the compiled CLI: `box create --from SNAP` makes a box with
// the snapshot's files and its own identity, a snapshot of the fork shares
// every unchanged chunk with the snapshot it came from (counted in the
// store), and `session fork --at SEQ` starts a new box and session from the
// checkpoint at or before that seq.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openStore, storeLocation, type Store } from "../../host/src/snapshot/index.ts";
import { type Home, makeHome, opOutput } from "../helpers.ts";

let h: Home;

async function ok(args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}
const sh = (box: string, script: string) => ok(["exec", box, "--", "sh", "-c", script]);
const snap = async (box: string, label: string) =>
  opOutput<{ snapshot: { id: string; files: number; bytesAdded: number } }>(
    await ok(["snapshot", "create", box, "--label", label, "--json"]),
  ).result.snapshot;

/** path → chunk ids of every file in a snapshot, read from the store itself. */
async function chunksOf(store: Store, id: string): Promise<Map<string, string[]>> {
  const rec = await store.getSnapshot(id);
  const out = new Map<string, string[]>();
  const walk = async (tree: string, prefix: string) => {
    for (const e of await store.readTree(tree, prefix || "/")) {
      const p = prefix ? `${prefix}/${e.name}` : e.name;
      if (e.type === "dir") await walk(e.tree!, p);
      else if (e.type === "file") out.set(p, e.content!);
    }
  };
  await walk(rec.tree, "");
  return out;
}

const FILES =
  "mkdir -p /workspace/src /workspace/empty && seq 1 3000 > /workspace/src/nums.txt && echo one > /workspace/src/v.txt" +
  " && head -c 3000000 /dev/urandom > /workspace/big.bin && ln -s src/nums.txt /workspace/link" +
  ' && echo \'{"customApiKeyResponses":{"approved":["old-box-stub-tail"]}}\' > /home/hutch/.claude.json && echo note > /home/hutch/note';

beforeAll(async () => {
  h = makeHome("hutch-fork-");
  await ok(["box", "create", "a", "--start"]);
  await sh("a", FILES);
}, 120_000);
afterAll(() => h.cleanup(), 120_000);

describe("forks", () => {
  let first = "";
  let sessionId = "";
  let secondSeq = 0;
  let second = "";

  test("box create --from: the snapshot's files, its own identity, no agent config of the old box", async () => {
    const s = JSON.parse(await ok(["run", "a", "--detach", "--json"])) as { id: string };
    sessionId = s.id;
    first = (await snap("a", "one")).id;
    await sh("a", "echo two > /workspace/src/v.txt");
    second = (await snap("a", "two")).id;
    const log = (await ok(["session", "log", sessionId, "--json"]))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { seq: number; kind: string; data: { snapshot?: string } });
    secondSeq = log.filter((e) => e.kind === "checkpoint.created").at(-1)!.seq;

    const b = JSON.parse(await ok(["box", "create", "b", "--from", first, "--json"])) as { id: string; state: string };
    const a = JSON.parse(await ok(["box", "info", "a", "--json"])) as { id: string };
    expect(b.state).toBe("stopped");
    expect(b.id).not.toBe(a.id);
    await ok(["box", "start", "b"]);
    expect(
      await sh(
        "b",
        "cat /workspace/src/v.txt; sed -n 3000p /workspace/src/nums.txt; readlink /workspace/link; test -d /workspace/empty && cat /home/hutch/note",
      ),
    ).toBe("one\n3000\nsrc/nums.txt\nnote\n");
    expect(await sh("b", "sha256sum < /workspace/big.bin")).toBe(await sh("a", "sha256sum < /workspace/big.bin"));
    // The old box's agent config (it holds a piece of that box's stub) stays behind.
    expect((await h.run(["exec", "b", "--", "test", "-e", "/home/hutch/.claude.json"])).code).not.toBe(0);
  }, 180_000);

  test("a snapshot of the fork shares every unchanged chunk with the snapshot it came from", async () => {
    const fork = await snap("b", "fork");
    const store = await openStore(storeLocation(h.home));
    try {
      const before = await chunksOf(store, first);
      const after = await chunksOf(store, fork.id);
      before.delete("home/.claude.json");
      const wanted = [...before.values()].flat();
      const have = new Set([...after.values()].flat());
      const shared = wanted.filter((c) => have.has(c));
      // big.bin alone is several chunks; every one of them, and every small file's, is shared.
      expect(wanted.length).toBeGreaterThan(before.size);
      expect(shared.length).toBe(wanted.length);
      for (const [p, ids] of before) expect(after.get(p)).toEqual(ids);
      expect(fork.bytesAdded).toBeLessThan(64 * 1024);
    } finally {
      store.close();
    }
  }, 180_000);

  test("session fork --at: a new box and session from the checkpoint at or before the seq", async () => {
    const f = JSON.parse(await ok(["session", "fork", sessionId, "--at", String(secondSeq - 1), "--json"])) as {
      checkpoint: number;
      snapshot: string;
      box: { name: string; state: string };
      session: { id: string; box: string; agent: string };
    };
    expect(f.snapshot).toBe(first);
    expect(f.checkpoint).toBeLessThan(secondSeq);
    expect(f.box.name).toBe("a-fork-1");
    expect(f.box.state).toBe("running");
    expect(f.session.agent).toBe("shell");
    expect(f.session.id).not.toBe(sessionId);
    expect(await sh("a-fork-1", "cat /workspace/src/v.txt")).toBe("one\n");

    const latest = JSON.parse(await ok(["session", "fork", sessionId, "--at", String(secondSeq), "--json"])) as { box: { name: string } };
    expect(latest.box.name).toBe("a-fork-2");
    expect(await sh("a-fork-2", "cat /workspace/src/v.txt")).toBe("two\n");

    // A client may append checkpoint.created naming any snapshot: a fork takes only the daemon's.
    const other = first;
    const res = await fetch(`http://localhost/v1/sessions/${sessionId}/events`, {
      method: "POST",
      unix: join(h.home, "hutch.sock"),
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ events: [{ kind: "checkpoint.created", data: { name: "forged", snapshot: other } }] }),
    });
    expect(res.status).toBeLessThan(300);
    const last = JSON.parse(await ok(["session", "info", sessionId, "--json"])) as { lastSeq: number };
    const forged = JSON.parse(await ok(["session", "fork", sessionId, "--at", String(last.lastSeq), "--json"])) as {
      snapshot: string;
    };
    expect(forged.snapshot).toBe(second);

    const none = await h.run(["session", "fork", sessionId, "--at", "1"]);
    expect(none.code).toBe(4);
    expect(none.stderr).toContain("no checkpoint");
  }, 180_000);
});
