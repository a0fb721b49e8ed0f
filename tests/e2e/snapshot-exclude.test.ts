// What a box's snapshot leaves out, through the compiled CLI, on both paths
// (through the guest while it runs, from its disk while it is stopped):
// config.json's roots and rules, .hutchignore files, and an agent config
// file holding the box's stub, which nothing brings back.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Home, makeHome, opOutput } from "../helpers.ts";

let h: Home;

async function ok(args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}
const sh = (box: string, script: string) => ok(["exec", box, "--", "sh", "-c", script]);

async function files(snap: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (path: string) => {
    const b = JSON.parse(await ok(["snapshot", "browse", snap, ...(path ? [path] : []), "--json"])) as {
      entries: { name: string; type: string }[];
    };
    for (const e of b.entries) {
      const p = path ? `${path}/${e.name}` : e.name;
      if (e.type === "dir") await walk(p);
      else out.push(p);
    }
  };
  await walk("");
  return out.sort();
}

beforeAll(async () => {
  h = makeHome("hutch-excl-");
  writeFileSync(join(h.home, "config.json"), JSON.stringify({ snapshots: { exclude: ["workspace/node_modules/", "*.log", "!keep.log"] } }));
  await ok(["box", "create", "x", "--start"]);
  await sh(
    "x",
    "mkdir -p /workspace/node_modules/dep /workspace/src /workspace/gen/out && echo a > /workspace/src/a.ts && echo n > /workspace/src/n.log" +
      " && echo k > /workspace/src/keep.log && echo d > /workspace/node_modules/dep/i.js && printf 'out/\\n' > /workspace/gen/.hutchignore" +
      " && echo o > /workspace/gen/out/o.bin && echo g > /workspace/gen/g.txt" +
      " && printf '!.claude.json\\n' > /home/hutch/.hutchignore && echo '{\"approved\":[\"stub-tail\"]}' > /home/hutch/.claude.json",
  );
}, 120_000);
afterAll(() => h.cleanup(), 120_000);

const WANT = ["home/.hutchignore", "workspace/gen/.hutchignore", "workspace/gen/g.txt", "workspace/src/a.ts", "workspace/src/keep.log"];

describe("snapshot excludes", () => {
  test("through the guest of a running box", async () => {
    const s = opOutput<{ snapshot: { id: string; via: string } }>(await ok(["snapshot", "create", "x", "--json"])).result.snapshot;
    expect(s.via).toBe("guest");
    expect(await files(s.id)).toEqual(WANT);
  }, 120_000);

  test("from the disk of the stopped box; and config.json's roots", async () => {
    await ok(["box", "stop", "x"]);
    const s = opOutput<{ snapshot: { id: string; via: string } }>(await ok(["snapshot", "create", "x", "--json"])).result.snapshot;
    expect(s.via).toBe("disk");
    expect(await files(s.id)).toEqual(WANT);
    writeFileSync(join(h.home, "config.json"), JSON.stringify({ snapshots: { roots: ["workspace"], ignoreFile: false } }));
    const w = opOutput<{ snapshot: { id: string } }>(await ok(["snapshot", "create", "x", "--json"])).result.snapshot;
    const got = await files(w.id);
    expect(got.every((p) => p.startsWith("workspace/"))).toBe(true);
    expect(got).toContain("workspace/gen/out/o.bin");
    expect(got).toContain("workspace/node_modules/dep/i.js");
  }, 120_000);
});
