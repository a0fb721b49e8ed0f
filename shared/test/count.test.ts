import { expect, test } from "bun:test";
import { count } from "../src/text/count.ts";

test("a count agrees with its noun: one is singular, every other number plural", () => {
  expect(count(1, "file")).toBe("1 file");
  expect(count(0, "file")).toBe("0 files");
  expect(count(2, "file")).toBe("2 files");
  expect(count(1, "entry", "entries")).toBe("1 entry");
  expect(count(3, "entry", "entries")).toBe("3 entries");
  expect(count(1, "box", "boxes")).toBe("1 box");
  expect(count(-1, "byte")).toBe("-1 bytes");
});
