// The compiled binary reads nothing from the directory it is run in. A
// compiled Bun program loads `.env` and `bunfig.toml` from its working
// directory unless built not to (scripts/compile.ts), and a bunfig's
// `preload` runs code before the program's first line: hutch is run inside
// repositories, including ones a box's work was brought home to.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeHome } from "../helpers.ts";

const h = makeHome("hutch-cwd-");
const repo = mkdtempSync(join(tmpdir(), "hutch-cwd-repo-"));
afterAll(async () => {
  await h.cleanup();
  rmSync(repo, { recursive: true, force: true });
});

test("a bunfig.toml's preload and a .env in the working directory are ignored", async () => {
  const marker = join(repo, "preloaded");
  writeFileSync(join(repo, "evil.js"), `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "ran");\n`);
  writeFileSync(join(repo, "bunfig.toml"), 'preload = ["./evil.js"]\n');
  // Read, this would send the verb to a remote that does not exist.
  writeFileSync(join(repo, ".env"), "HUTCH_REMOTE=nowhere\n");

  const version = await h.run(["--version"], { cwd: repo });
  expect(version.code, version.stderr).toBe(0);
  const list = await h.run(["box", "list", "--json"], { cwd: repo });
  expect(list.code, list.stderr).toBe(0);
  expect(JSON.parse(list.stdout)).toEqual([]);
  expect(existsSync(marker)).toBe(false);
});
