// Symlinks from a box resolved against the tree they arrive in and the work
// tree: each link of a chain may look harmless while the chain leaves the
// repository. Real git repositories in temporary directories.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkTree, LINK_DEPTH_MAX, resolveLink } from "../src/workspace/apply.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function git(dir: string, ...args: string[]): string {
  const r = Bun.spawnSync(["git", ...args], { cwd: dir });
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
  return r.stdout.toString().trim();
}

/** A repository whose tree holds these symlinks (and a file); the links are then removed from disk. */
function treeOf(links: [string, string][]): { dir: string; tree: string } {
  const dir = mkdtempSync(join(tmpdir(), "hutch-apply-"));
  dirs.push(dir);
  git(dir, "init", "-q");
  writeFileSync(join(dir, "file.txt"), "x\n");
  for (const [p, t] of links) symlinkSync(t, join(dir, p));
  git(dir, "add", "-A");
  const tree = git(dir, "write-tree");
  for (const [p] of links) unlinkSync(join(dir, p));
  return { dir, tree };
}

const CHAIN: [string, string][] = [
  ["d", "."],
  ["e", "d/.."],
  ["f", "e/.."],
  ["shadowlink", "f/etc/shadow"],
];

describe("chained symlinks from a box", () => {
  test("the chain d -> ., e -> d/.., f -> e/.., shadowlink -> f/etc/shadow is refused, naming the link and where it points", async () => {
    const { dir, tree } = treeOf(CHAIN);
    const err = await checkTree(dir, tree, "refs/hutch/x/").catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    // e is the first link of the chain to leave (d/.. is the repository's parent once d is followed).
    expect((err as Error).message).toBe(
      "refused what the box sent: the symlink e points outside the repository (d/.., through the symlink d); nothing was applied",
    );
  });

  test("the leaf alone is named when the chain's middle is in the work tree already", async () => {
    const { dir, tree } = treeOf([["shadowlink", "f/etc/shadow"]]);
    // A local, untracked symlink the box's link goes through.
    symlinkSync("..", join(dir, "f"));
    const err = await checkTree(dir, tree, "refs/hutch/x/").catch((e: Error) => e);
    expect((err as Error).message).toContain("the symlink shadowlink points outside the repository (f/etc/shadow, through the symlink f)");
  });

  test("links that stay inside, through other links, pass", async () => {
    const { dir, tree } = treeOf([
      ["d", "."],
      ["sub", "d/file.txt"],
      ["g", "d/d/d/file.txt"],
    ]);
    await checkTree(dir, tree, "refs/hutch/x/");
  });

  test.each([
    [
      "a loop",
      [
        ["a", "b"],
        ["b", "a"],
      ],
      "goes through more than 40 symlinks",
    ],
    [
      "through a link to an absolute path",
      [
        ["a", "/etc"],
        ["b", "a/passwd"],
      ],
      "points at an absolute path",
    ],
    [
      "into .git through a link",
      [
        ["g", "d/.git/config"],
        ["d", "."],
      ],
      "points into .git",
    ],
  ] as [string, [string, string][], string][])("refused: %s", async (_, links, why) => {
    const { dir, tree } = treeOf(links);
    const err = await checkTree(dir, tree, "refs/hutch/x/").catch((e: Error) => e);
    expect((err as Error).message).toContain(why);
  });

  test("resolution as the kernel does it", () => {
    const links = new Map(CHAIN);
    const look = (p: string) => (links.has(p) ? { link: links.get(p)! } : null);
    expect(resolveLink("d", ".", look)).toEqual({ at: "" });
    expect(resolveLink("x/y", "../d/file", look)).toEqual({ at: "file" });
    expect("why" in resolveLink("f", "e/..", look)).toBe(true);
    const self = (p: string) => (p === "loop" ? { link: "loop" } : null);
    expect(resolveLink("loop", "loop", self)).toEqual({
      why: expect.stringContaining(`more than ${LINK_DEPTH_MAX} symlinks`) as unknown as string,
    });
  });
});
