// What a snapshot leaves out: configured rules, .hutchignore files in the
// tree, and forced rules (a box's stub-holding files) nothing brings back.
// The disk walk and the stream path (the guest's packTar with the same
// rules, and the host's own check of the archive) keep the same paths.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { IgnoreRules, Ignorer, rulesForRoot } from "@hutch/shared/wire";
import { packTar } from "@hutch/shared/node";
import { snapshotTree, type Store } from "../src/snapshot/index.ts";
import { snapshotStreams } from "../src/snapshot/stream-save.ts";
import { cleanupTemps, newStore, tempDir } from "./snapshot-helpers.ts";

afterAll(cleanupTemps);

const EXCLUDE = ["workspace/node_modules/", "*.log", "!keep.log", "home/.cache/"];
const NEVER = ["/home/.claude.json", "/home/.codex/config.toml"];

function tree(): { workspace: string; home: string } {
  const top = tempDir();
  const files: Record<string, string> = {
    "workspace/src/a.ts": "a",
    "workspace/src/debug.log": "noise",
    "workspace/src/keep.log": "kept by a negation",
    "workspace/node_modules/x/index.js": "dep",
    "workspace/lib/node_modules/y.js": "only the top one is excluded",
    "workspace/gen/.hutchignore": "out/\n*.tmp\n!important.tmp\n",
    "workspace/gen/out/big.bin": "generated",
    "workspace/gen/a.tmp": "tmp",
    "workspace/gen/important.tmp": "re-included below",
    "workspace/gen/keep.txt": "kept",
    "workspace/other/a.tmp": "a rule file's rules stay in its directory",
    "home/.hutchignore": "!.claude.json\n",
    "home/.claude.json": '{"customApiKeyResponses":{"approved":["stub-tail"]}}',
    "home/.codex/config.toml": "stub",
    "home/.cache/pip/x": "cache",
    "home/notes.md": "notes",
  };
  for (const [rel, body] of Object.entries(files)) {
    mkdirSync(join(top, rel, ".."), { recursive: true });
    writeFileSync(join(top, rel), body);
  }
  return { workspace: join(top, "workspace"), home: join(top, "home") };
}

async function paths(store: Store, id: string): Promise<string[]> {
  const snap = await store.getSnapshot(id);
  const out: string[] = [];
  const walk = async (t: string, prefix: string) => {
    for (const e of await store.readTree(t, prefix || "/")) {
      const p = prefix ? `${prefix}/${e.name}` : e.name;
      if (e.type === "dir") await walk(e.tree!, p);
      else out.push(p);
    }
  };
  await walk(snap.tree, "");
  return out.sort();
}

/** Every file kept (directories are checked apart). */
const WANT = [
  "home/.hutchignore",
  "home/notes.md",
  "workspace/gen/.hutchignore",
  "workspace/gen/important.tmp",
  "workspace/gen/keep.txt",
  "workspace/lib/node_modules/y.js",
  "workspace/other/a.tmp",
  "workspace/src/a.ts",
  "workspace/src/keep.log",
];

describe("excludes", () => {
  test("the disk walk leaves out configured rules, .hutchignore's, and forced rules whatever negates them", async () => {
    const { store } = await newStore();
    const t = tree();
    const r = await snapshotTree(
      store,
      [
        { name: "workspace", path: t.workspace },
        { name: "home", path: t.home },
      ],
      { exclude: EXCLUDE, never: NEVER, ignoreFile: ".hutchignore" },
    );
    expect(await paths(store, r.id)).toEqual(WANT);
    // home/.codex stays, empty: only its config file is a box's own.
    const top = await store.readTree((await store.getSnapshot(r.id)).tree, "/");
    const home = await store.readTree(top.find((e) => e.name === "home")!.tree!, "home");
    expect(home.map((e) => e.name)).toEqual([".codex", ".hutchignore", "notes.md"]);
    store.close();
  });

  test("the stream path keeps the same files: the guest's packTar applies the rules, and the host checks again", async () => {
    const { store } = await newStore();
    const t = tree();
    const pack = (name: "workspace" | "home", path: string) =>
      packTar(path, { ignore: new Ignorer([IgnoreRules.parse(rulesForRoot([...EXCLUDE, ...NEVER], name))]), ignoreFile: ".hutchignore" });
    const r = await snapshotStreams(
      store,
      [
        { name: "workspace", tar: pack("workspace", t.workspace) },
        { name: "home", tar: pack("home", t.home) },
      ],
      { exclude: EXCLUDE, never: NEVER },
    );
    expect(await paths(store, r.id)).toEqual(WANT);

    // A guest that ignores the rules (an old or a hostile one) still gets nothing forced or configured stored.
    const raw = await snapshotStreams(
      store,
      [
        { name: "workspace", tar: packTar(t.workspace) },
        { name: "home", tar: packTar(t.home) },
      ],
      { exclude: EXCLUDE, never: NEVER },
    );
    const rawPaths = await paths(store, raw.id);
    expect(rawPaths).not.toContain("home/.claude.json");
    expect(rawPaths).not.toContain("workspace/node_modules/x/index.js");
    expect(rawPaths).not.toContain("workspace/src/debug.log");
    expect(rawPaths).toContain("workspace/src/keep.log");
    store.close();
  });
});
