// The snapshot exclude rules: gitignore's syntax, as a table.
import { describe, expect, test } from "bun:test";
import { IGNORE_LIMITS, IgnoreRules, Ignorer, rulesForRoot } from "../src/ignore.ts";

const decide = (rules: string[], path: string, isDir = false) => new Ignorer([IgnoreRules.parse(rules)]).ignored(path, isDir);

describe("rules", () => {
  test.each([
    [["node_modules"], "workspace/a/node_modules", true, true],
    [["node_modules/"], "workspace/a/node_modules", false, false],
    [["node_modules/"], "workspace/a/node_modules", true, true],
    [["*.log"], "workspace/x/y.log", false, true],
    [["*.log"], "workspace/x/y.logs", false, false],
    [["/workspace/build"], "workspace/build", true, true],
    [["/workspace/build"], "workspace/src/build", true, false],
    [["workspace/build"], "workspace/build", true, true],
    [["build/out"], "x/build/out", false, false],
    [["**/dist"], "workspace/a/b/dist", true, true],
    [["**/dist"], "dist", true, true],
    [["workspace/**/tmp"], "workspace/tmp", true, true],
    [["workspace/**/tmp"], "workspace/a/b/tmp", true, true],
    [["home/.cache/**"], "home/.cache/pip/x", false, true],
    [["file?.txt"], "file1.txt", false, true],
    [["file?.txt"], "file10.txt", false, false],
    [["[ab].c"], "b.c", false, true],
    [["[!ab].c"], "b.c", false, false],
    [["*.log", "!keep.log"], "keep.log", false, false],
    [["!keep.log", "*.log"], "keep.log", false, true],
    [["# comment", "", "  "], "# comment", false, false],
    [["\\#lit"], "#lit", false, true],
    [["a b"], "x/a b", false, true],
    [["*"], "line\nbreak", false, true],
  ] as const)("%j on %j (dir %p): %p", (rules, path, isDir, want) => {
    expect(decide([...rules], path, isDir)).toBe(want);
  });

  test("a rule file's rules apply below its directory only, and later (deeper) ones win", () => {
    const ig = new Ignorer([IgnoreRules.parse(["*.tmp"])]);
    ig.add(IgnoreRules.parse("!keep.tmp\nlocal/\n", "workspace/p"));
    expect(ig.ignored("workspace/p/keep.tmp", false)).toBe(false);
    expect(ig.ignored("workspace/q/keep.tmp", false)).toBe(true);
    expect(ig.ignored("workspace/p/local", true)).toBe(true);
    expect(ig.ignored("workspace/plocal", true)).toBe(false);
  });

  test("forced rules win over every negation", () => {
    const ig = new Ignorer([IgnoreRules.parse(["!.claude.json"])], IgnoreRules.parse(["/home/.claude.json"]));
    ig.add(IgnoreRules.parse("!.claude.json", "home"));
    expect(ig.ignored("home/.claude.json", false)).toBe(true);
    expect(ig.ignored("workspace/.claude.json", false)).toBe(false);
  });

  test("bounds: rules per file, pattern length, rule files per walk", () => {
    expect(IgnoreRules.parse(Array.from({ length: IGNORE_LIMITS.rules + 50 }, (_, i) => `f${i}`)).size).toBe(IGNORE_LIMITS.rules);
    expect(IgnoreRules.parse([`${"a".repeat(IGNORE_LIMITS.patternChars + 1)}`]).size).toBe(0);
    const ig = new Ignorer();
    for (let i = 0; i < IGNORE_LIMITS.files; i++) expect(ig.add(IgnoreRules.parse(["x"], `d${i}`))).toBe(true);
    expect(ig.add(IgnoreRules.parse(["x"], "more"))).toBe(false);
  });

  test("a hostile pattern stays linear: no nested quantifiers", () => {
    const t0 = performance.now();
    expect(decide(["*a*a*a*a*a*a*a*a*a*a*a*a*b"], `${"a".repeat(200)}`)).toBe(false);
    expect(decide(["**a**a**a**a**a**a**a**b"], `${"a/".repeat(100)}`)).toBe(false);
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});

describe("rulesForRoot", () => {
  test.each([
    [["*.log"], "workspace", ["*.log"]],
    [["workspace/node_modules/"], "workspace", ["/node_modules/"]],
    [["workspace/node_modules/"], "home", []],
    [["*/build"], "home", ["/build"]],
    [["!workspace/keep"], "workspace", ["!/keep"]],
    [["**/dist"], "home", ["**/dist"]],
    [["/home"], "home", []],
    [["/home/.claude.json"], "home", ["/.claude.json"]],
  ] as const)("%j for %s: %j", (rules, root, want) => {
    expect(rulesForRoot([...rules], root)).toEqual([...want]);
  });
});
