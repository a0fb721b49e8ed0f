// Snapshots of real process boxes through the compiled CLI: through the guest
// while a box runs, from its disk while it is stopped; the timeline, browse,
// diff with hunks, restore (default and in place), check and prune; a
// checkpoint in the box's open session; and the store's bytes never hold a
// workspace's plaintext.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { makeHome, type Home } from "../helpers.ts";

let h: Home;
const MARKER = "plaintext-marker-4f2a9c-never-in-the-store";

async function ok(args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}
const sh = (box: string, script: string) => ok(["exec", box, "--", "sh", "-c", script]);
/** An op's --json output: NDJSON progress, the result last. */
function lastLine(out: string): { type: string; value: Record<string, unknown> } {
  const lines = out
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  for (const l of lines.slice(0, -1)) expect(["step", "detail", "note", "done", "counts"]).toContain(l.type);
  return lines.at(-1);
}

function storeFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((f) => join(dir, f))
    .filter((f) => statSync(f).isFile());
}

beforeAll(async () => {
  h = makeHome("hutch-snap-");
  await ok(["box", "create", "w", "--start"]);
  await sh(
    "w",
    `mkdir -p /workspace/src /workspace/empty && seq 1 2000 > /workspace/src/nums.txt && echo '${MARKER}' > /workspace/secret-ish.txt && ln -s src/nums.txt /workspace/link && head -c 300000 /dev/urandom > /workspace/blob.bin && echo home > /home/hutch/.profile-note`,
  );
}, 120_000);
afterAll(async () => {
  await h.cleanup();
});

describe("hutch snapshot", () => {
  let first = "";
  let second = "";
  let third = "";

  test("create through the guest of a running box, then from the disk of the stopped box; the timeline counts changes", async () => {
    const a = lastLine(await ok(["snapshot", "create", "w", "--label", "start", "--json"]));
    expect(a.type).toBe("result");
    const s1 = a.value.snapshot as Record<string, unknown>;
    expect(s1).toMatchObject({ boxName: "w", label: "start", via: "guest", files: 4, filesChanged: 4 });
    first = s1.id as string;

    await sh("w", "seq 1 2000 | sed 's/^1000$/one thousand/' > /workspace/src/nums.txt && echo new > /workspace/src/added.txt");
    const b = lastLine(await ok(["snapshot", "create", "w", "--label", "edit", "--json"]));
    const s2 = b.value.snapshot as Record<string, unknown>;
    expect(s2).toMatchObject({ via: "guest", files: 5, filesChanged: 2, parent: first });
    // The 300 KB random file and the rest are not stored again.
    expect(s2.bytesAdded as number).toBeLessThan(64 * 1024);
    second = s2.id as string;

    await ok(["box", "stop", "w"]);
    const c = lastLine(await ok(["snapshot", "create", "w", "--json"]));
    const s3 = c.value.snapshot as Record<string, unknown>;
    expect(s3).toMatchObject({ via: "disk", files: 5, filesChanged: 0 });
    third = s3.id as string;

    const list = JSON.parse(await ok(["snapshot", "list", "w", "--json"])) as { id: string }[];
    expect(list.map((s) => s.id)).toEqual([first, second, third]);
    const human = await ok(["snapshot", "list"]);
    expect(human).toContain("CHANGED");
    expect(human).toContain("edit");
  }, 120_000);

  test("browse lists a directory; diff shows a text hunk and a binary summary", async () => {
    const top = JSON.parse(await ok(["snapshot", "browse", second, "--json"]));
    expect(top.entries.map((e: { name: string }) => e.name)).toEqual(["home", "workspace"]);
    const ws = JSON.parse(await ok(["snapshot", "browse", second, "workspace", "--json"]));
    expect(ws.entries.map((e: { name: string; type: string }) => `${e.name}:${e.type}`)).toEqual([
      "blob.bin:file",
      "empty:dir",
      "link:symlink",
      "secret-ish.txt:file",
      "src:dir",
    ]);
    expect(ws.entries.find((e: { name: string }) => e.name === "link").target).toBe("src/nums.txt");

    const d = JSON.parse(await ok(["snapshot", "diff", first, second, "--json"]));
    const byPath = Object.fromEntries(d.changes.map((c: { path: string }) => [c.path, c]));
    expect(byPath["workspace/src/nums.txt"].change).toBe("modified");
    expect(byPath["workspace/src/nums.txt"].patch).toContain("-1000\n+one thousand\n");
    expect(byPath["workspace/src/added.txt"]).toMatchObject({
      change: "added",
      patch: "--- /dev/null\n+++ b/workspace/src/added.txt\n@@ -0,0 +1,1 @@\n+new\n",
    });

    await ok(["box", "start", "w"]);
    await sh("w", "head -c 1000 /dev/urandom >> /workspace/blob.bin");
    const bin = lastLine(await ok(["snapshot", "create", "w", "--json"])).value.snapshot as { id: string };
    const d2 = JSON.parse(await ok(["snapshot", "diff", second, bin.id, "--json"]));
    const blob = d2.changes.find((c: { path: string }) => c.path === "workspace/blob.bin");
    expect(blob).toMatchObject({ change: "modified", binary: { before: 300000, after: 301000 } });
    expect(blob.patch).toBeUndefined();
  }, 120_000);

  test("restore into ~/Restored/<time>/, and --in-place of one path", async () => {
    const r = lastLine(await ok(["snapshot", "restore", "w", first, "--json"]));
    const into = (r.value.into as string[])[0]!;
    expect(into).toMatch(/^\/home\/hutch\/Restored\/\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ$/);
    expect(
      await sh(
        "w",
        `sed -n 1000p ${into}/workspace/src/nums.txt && readlink ${into}/workspace/link && test -d ${into}/workspace/empty && cat ${into}/home/.profile-note`,
      ),
    ).toBe("1000\nsrc/nums.txt\nhome\n");

    expect(await sh("w", "sed -n 1000p /workspace/src/nums.txt")).toBe("one thousand\n");
    await ok(["snapshot", "restore", "w", first, "--in-place", "--path", "workspace/src/nums.txt"]);
    expect(await sh("w", "sed -n 1000p /workspace/src/nums.txt; test -f /workspace/src/added.txt && echo kept")).toBe("1000\nkept\n");
  }, 120_000);

  test("a restore path that leaves the snapshot is refused, naming it", async () => {
    const r = await h.run(["snapshot", "restore", "w", first, "--path", "../../etc"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('".." component');
  });

  test("the store holds no plaintext of the workspace, and check --read-data passes", async () => {
    const files = storeFiles(join(h.home, "snapshots"));
    expect(files.length).toBeGreaterThan(3);
    for (const f of files) expect(readFileSync(f).includes(Buffer.from(MARKER))).toBe(false);
    // Positive control: the restored copy in the box has it.
    expect(await sh("w", "cat /home/hutch/Restored/*/workspace/secret-ish.txt")).toContain(MARKER);
    const c = lastLine(await ok(["snapshot", "check", "--read-data", "--json"]));
    expect(c.value).toMatchObject({ ok: true, errors: [] });
    expect(c.value.packsRead as number).toBeGreaterThan(0);
  }, 120_000);

  test("a snapshot is a checkpoint.created event in the box's open session", async () => {
    const s = JSON.parse(await ok(["run", "w", "--detach", "--json"]));
    const snap = lastLine(await ok(["snapshot", "create", "w", "--label", "checkpoint me", "--json"])).value.snapshot as { id: string };
    const log = (await ok(["session", "log", s.id, "--json"]))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const cp = log.find((e) => e.kind === "checkpoint.created");
    expect(cp?.data).toEqual({ name: "checkpoint me", ref: snap.id, snapshot: snap.id });
    expect(cp?.actor.kind).toBe("system");
  }, 120_000);

  test("prune --keep-last forgets the rest; what is kept still restores", async () => {
    const before = JSON.parse(await ok(["snapshot", "list", "--json"])) as { id: string }[];
    const p = lastLine(await ok(["snapshot", "prune", "--keep-last", "2", "--json"]));
    expect((p.value.forgotten as string[]).length).toBe(before.length - 2);
    const after = JSON.parse(await ok(["snapshot", "list", "--json"])) as { id: string }[];
    expect(after.map((s) => s.id)).toEqual(before.slice(-2).map((s) => s.id));
    const c = lastLine(await ok(["snapshot", "check", "--read-data", "--json"]));
    expect(c.value.ok).toBe(true);
    const r = lastLine(await ok(["snapshot", "restore", "w", after[0]!.id, "--json"]));
    expect(r.value.files as number).toBeGreaterThan(0);
  }, 120_000);
});
