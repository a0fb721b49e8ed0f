import { describe, expect, test } from "bun:test";
import { tooDeep } from "../src/validate.ts";

describe("tooDeep", () => {
  test.each([
    ["{}", 1, null],
    ["{}", 0, ""],
    ['{"a":{}}', 1, "a"],
    ['{"a":1,"b":[{}]}', 2, "b.0"],
    ['{"a":1,"b":[{}]}', 3, null],
    ["[1,2,[3,[4]]]", 2, "2.1"],
    ["[1,2,[3,[4]]]", 3, null],
    ['{"events":[{"kind":"k"},{"data":{"x":[[]]}}]}', 5, "events.1.data.x.0"],
    // Brackets and quotes inside strings are text, not structure.
    ['{"s":"[[[{{{\\"]]]","t":{}}', 1, "t"],
    ['{"a\\"b:c":{}}', 1, 'a"b:c'],
    // A string ending in an escaped backslash ends at the next quote.
    ['{"s":"x\\\\","t":{}}', 1, "t"],
    ['{"k":"v","x":{}}', 1, "x"],
    // Keys are read by position: a value string is never taken for a key.
    ['{"a":"b","c":{"d":"e","f":{}}}', 2, "c.f"],
    ["   [ [ ] ]  ", 1, "0"],
  ])("%s at most %d deep: %p", (text, max, want) => {
    expect(tooDeep(text, max)).toBe(want);
  });

  test("a hostile depth is found at its first byte past the limit", () => {
    expect(tooDeep("[".repeat(1_000_000), 32)).toBe(Array(32).fill("0").join("."));
  });
});
