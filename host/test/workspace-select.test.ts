import { describe, expect, test } from "bun:test";
import { badLink, badPath } from "../src/workspace/apply.ts";
import { parseBundleHeader } from "../src/workspace/bundle.ts";
import { exactPattern } from "../src/workspace/ignored.ts";
import { ignoredMatcher, selector } from "../src/workspace/select.ts";

describe("what offload holds back", () => {
  const cases: [string, string, string[], string | null][] = [
    // path, .hutchignore, --include, the rule that holds it back (or null)
    [".env", "", [], "default deny list (.env)"],
    ["app/.env.local", "", [], "default deny list (.env.*)"],
    [".envrc", "", [], "default deny list (.envrc)"],
    ["keys/id_ed25519", "", [], "default deny list (id_ed25519)"],
    ["keys/id_ed25519.pub", "", [], null],
    ["tls/server.pem", "", [], "default deny list (*.pem)"],
    [".git-credentials", "", [], "default deny list (.git-credentials)"],
    [".aws/credentials", "", [], "default deny list (.aws/credentials)"],
    ["src/environment.ts", "", [], null],
    ["src/main.ts", "", [], null],
    ["secrets/db.txt", "secrets/\n", [], ".hutchignore (secrets/)"],
    ["a/secrets/db.txt", "secrets/\n", [], ".hutchignore (secrets/)"],
    ["a/secrets/db.txt", "/secrets/\n", [], null],
    ["big.bin", "# a comment\n*.bin\n", [], ".hutchignore (*.bin)"],
    [".env.example", "!.env.example\n", [], null],
    [".env", "", [".env"], null],
    ["sub/.env", "", [".env"], "default deny list (.env)"],
  ];
  for (const [path, ignore, include, want] of cases)
    test(`${path} with ${JSON.stringify(ignore)} ${include.join(" ")}`, () => {
      expect(selector(ignore, include).heldBack(path)).toBe(want);
    });
});

describe("paths and symlinks from a box", () => {
  test.each([
    ["a/b.txt", null],
    ["/etc/passwd", "not a relative path"],
    ["a/../../x", "has an empty, . or .. component"],
    ["a//b", "has an empty, . or .. component"],
    ["sub/.GIT/config", "names a .git directory"],
  ])("path %p", (path, want) => expect(badPath(path)).toBe(want));

  test.each([
    ["link", "target", null],
    ["a/b/link", "../../c", null],
    ["a/link", "../../outside", "points outside the repository (../../outside)"],
    ["link", "/etc/passwd", "points at an absolute path (/etc/passwd)"],
    ["link", "..", "points outside the repository (..)"],
  ])("symlink %p -> %p", (path, target, want) => expect(badLink(path, target)).toBe(want));
});

describe("the header of a bundle from a box", () => {
  const sha = "a".repeat(40);
  const enc = (s: string) => new TextEncoder().encode(s);
  test("refs and prerequisites are read, the pack found", () => {
    const h = parseBundleHeader(enc(`# v2 git bundle\n-${sha} base\n${sha} refs/hutch-out/work\n\nPACK`));
    expect(h.prerequisites).toEqual([sha]);
    expect([...h.refs]).toEqual([["refs/hutch-out/work", sha]]);
    expect(h.packOffset).toBe(enc(`# v2 git bundle\n-${sha} base\n${sha} refs/hutch-out/work\n\n`).length);
  });
  test.each([
    ["# v3 git bundle\n\n", "not a v2 git bundle"],
    [`# v2 git bundle\n${sha} refs/x`, "no end of header"],
    [`# v2 git bundle\nzz refs/x\n\n`, "bad ref line"],
    [`# v2 git bundle\n${sha} refs/x extra\n\n`, "bad ref line"],
    [`# v2 git bundle\n-nothex\n\n`, "bad prerequisite line"],
  ])("%p is refused", (text, why) => expect(() => parseBundleHeader(enc(text))).toThrow(why));
});

describe("which ignored files --include-ignored carries", () => {
  const cases: [string, string[], boolean][] = [
    // path, patterns, carried
    ["build/out.o", ["build"], true],
    ["build/out.o", ["build/"], true],
    ["sub/build/out.o", ["build"], true],
    ["sub/build/out.o", ["/build"], false],
    ["node_modules/.cache/x.json", ["node_modules/.cache"], true],
    ["node_modules/pkg/index.js", ["node_modules/.cache"], false],
    ["a/node_modules/.cache/x", ["node_modules/.cache"], false],
    ["dist/app.js", ["*.js"], true],
    ["dist/app.map", ["*.js"], false],
    ["dist/app.js", ["!dist"], true],
    ["dist/app.js", [], false],
  ];
  for (const [path, patterns, want] of cases)
    test(`${path} with ${JSON.stringify(patterns)}: ${want ? "carried" : "not"}`, () => {
      expect(ignoredMatcher(patterns)(path)).toBe(want);
    });

  test("a carried path becomes a gitignore line that matches it exactly", () => {
    expect(exactPattern("build/out.o")).toBe("/build/out.o");
    expect(exactPattern("we*ird?[x]\\.txt")).toBe("/we\\*ird\\?\\[x]\\\\.txt");
    expect(exactPattern("!bang #hash ")).toBe("/!bang #hash\\ ");
  });
});
