// Names and ids are defined once in shared and composed elsewhere (schemas,
// path patterns, cp's BOX:path): the patterns accept what hutch makes and
// refuse what it never does.
import { describe, expect, test } from "bun:test";
import {
  AGENT_NAMES,
  AgentName,
  BOX_NAME,
  BoxName,
  check,
  ENGINE_NAMES,
  EngineName,
  ID_BODY,
  idPattern,
  newId,
  type IdPrefix,
} from "../src/index.ts";

describe("ids", () => {
  test.each(["box", "ses", "snap", "op", "pty", "evt"] as IdPrefix[])("a new %s id fits its pattern and no other", (prefix) => {
    const id = newId(prefix);
    expect(new RegExp(idPattern(prefix)).test(id)).toBe(true);
    expect(new RegExp(idPattern(prefix === "box" ? "ses" : "box")).test(id)).toBe(false);
    expect(new RegExp(`^${prefix}_${ID_BODY}$`).test(`${id}x`)).toBe(false);
  });
});

describe("box names", () => {
  test.each([
    ["web", true],
    ["a-1", true],
    ["x".repeat(63), true],
    ["x".repeat(64), false],
    ["Upper", false],
    ["-lead", false],
    ["", false],
  ])("%s: %p", (name, ok) => {
    expect(check(BoxName, name)).toBe(ok);
    expect(new RegExp(`^${BOX_NAME}$`).test(name)).toBe(ok);
  });
});

test("the name lists are the schemas' own members", () => {
  expect(AGENT_NAMES).toEqual(["claude", "codex", "opencode", "pi", "shell"]);
  expect(AGENT_NAMES.every((n) => check(AgentName, n))).toBe(true);
  expect(ENGINE_NAMES).toEqual(["process", "qemu"]);
  expect(ENGINE_NAMES.every((n) => check(EngineName, n))).toBe(true);
});
