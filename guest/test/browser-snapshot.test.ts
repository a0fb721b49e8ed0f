// Snapshot text as data: deltas and pages. (The snapshot's format is tested against real pages in browser.test.ts.)
import { describe, expect, test } from "bun:test";
import { deltaLines, page } from "../src/tools/browser/snapshot.ts";

describe("deltaLines", () => {
  test("one changed line in the middle of many", () => {
    const before = Array.from({ length: 1000 }, (_, i) => `- text: "${i}"`);
    const after = [...before];
    after[500] = '- text: "changed"';
    expect(deltaLines(before, after)).toEqual(["@@ line 501: 1 gone, 1 new", '- - text: "500"', '+ - text: "changed"']);
  });
  test("no change is empty", () => expect(deltaLines(["a", "b"], ["a", "b"])).toEqual([]));
  test("appended lines", () => expect(deltaLines(["a"], ["a", "b"])).toEqual(["@@ line 2: 0 gone, 1 new", "+ b"]));
});

describe("page", () => {
  test("cuts at a line boundary within the cap, and goes on from there", () => {
    const lines = ["aaaa", "bbbb", "cccc"];
    expect(page(lines, 0, 10)).toEqual({ text: "aaaa\nbbbb", next: 2 });
    expect(page(lines, 2, 10)).toEqual({ text: "cccc" });
  });
  test("a line longer than the cap still comes, alone", () =>
    expect(page(["x".repeat(50), "y"], 0, 10)).toEqual({ text: "x".repeat(50), next: 1 }));
});
