import { describe, expect, test } from "bun:test";
import { unifiedDiff } from "../src/snapshot/textdiff.ts";

const nums = (n: number) => `${Array.from({ length: n }, (_, i) => `${i + 1}`).join("\n")}\n`;

describe("unifiedDiff", () => {
  test("one changed line: a hunk with three lines of context, removal before addition", () => {
    expect(unifiedDiff("f", nums(10), nums(10).replace("\n5\n", "\nfive\n"))).toBe(
      ["--- a/f", "+++ b/f", "@@ -2,7 +2,7 @@", " 2", " 3", " 4", "-5", "+five", " 6", " 7", " 8", ""].join("\n"),
    );
  });

  test("changes far apart are two hunks; near ones share one", () => {
    const two = unifiedDiff("f", nums(40), nums(40).replace("\n3\n", "\nx\n").replace("\n30\n", "\ny\n"))!;
    expect(two.match(/^@@/gm)?.length).toBe(2);
    const one = unifiedDiff("f", nums(40), nums(40).replace("\n3\n", "\nx\n").replace("\n8\n", "\ny\n"))!;
    expect(one.match(/^@@/gm)?.length).toBe(1);
  });

  test("an added and a removed file diff against /dev/null", () => {
    expect(unifiedDiff("n", null, "a\nb\n")).toBe("--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+a\n+b\n");
    expect(unifiedDiff("n", "a\n", null)).toBe("--- a/n\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-a\n");
  });

  test("texts too different to compare cheaply give null (the caller shows sizes)", () => {
    const a = Array.from({ length: 3000 }, (_, i) => `a${i}`).join("\n");
    const b = Array.from({ length: 3000 }, (_, i) => `b${i}`).join("\n");
    expect(unifiedDiff("big", a, b)).toBeNull();
  });
});
