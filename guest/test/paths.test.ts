import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, realpath, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PathError, PathPolicy } from "../src/paths.ts";

let dir: string;
let ws: string;
let home: string;
let policy: PathPolicy;
beforeAll(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "hutch-paths-")));
  ws = join(dir, "ws");
  home = join(dir, "home");
  await mkdir(join(ws, "src"), { recursive: true });
  await mkdir(home);
  await symlink("/etc", join(ws, "out"));
  await symlink("src", join(ws, "in"));
  await symlink("../home", join(ws, "to-home"));
  await symlink("/nonexistent/x", join(ws, "dangling-out"));
  await symlink("src/new.txt", join(ws, "dangling-in"));
  await symlink("loop-b", join(ws, "loop-a"));
  await symlink("loop-a", join(ws, "loop-b"));
  policy = await PathPolicy.create([ws, home], ws);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

async function outcome(p: string): Promise<string> {
  try {
    return await policy.resolve(p);
  } catch (err) {
    if (err instanceof PathError) return err.code;
    throw err;
  }
}

describe("PathPolicy.resolve", () => {
  const cases: Array<[string, (d: { ws: string; home: string }) => string]> = [
    ["src", ({ ws }) => join(ws, "src")],
    [".", ({ ws }) => ws],
    ["src/not-yet/file.txt", ({ ws }) => join(ws, "src/not-yet/file.txt")],
    ["in/x", ({ ws }) => join(ws, "src/x")],
    ["to-home", ({ home }) => home],
    ["dangling-in", ({ ws }) => join(ws, "src/new.txt")],
    ["src/../src", ({ ws }) => join(ws, "src")],
    ["../../etc/passwd", () => "denied"],
    ["/etc/passwd", () => "denied"],
    ["out", () => "denied"],
    ["out/passwd", () => "denied"],
    ["dangling-out", () => "denied"],
    ["..", () => "denied"],
    ["/", () => "denied"],
    ["loop-a", () => "failed"],
    ["a\0b", () => "invalid"],
  ];
  for (const [input, want] of cases) {
    test(JSON.stringify(input), async () => {
      expect(await outcome(input)).toBe(want({ ws, home }));
    });
  }

  test("an absolute path inside a root resolves to itself", async () => {
    expect(await outcome(join(home, "a", "b"))).toBe(join(home, "a", "b"));
  });

  test("a sibling whose name starts with the root's is outside", async () => {
    await mkdir(`${ws}2`);
    expect(await outcome(`${ws}2/x`)).toBe("denied");
  });
});
