// What a session log keeps of an MCP call's arguments (loggedInput), the same
// for `hutch mcp` on the host and the box's own MCP server.
import { describe, expect, test } from "bun:test";
import { loggedInput } from "../src/protocol/mcp-tools.ts";

describe("loggedInput", () => {
  test("a long string is cut and says how long it was; short ones and scalars stay", () => {
    const long = "x".repeat(5000);
    expect(loggedInput({ text: long, n: 3, ok: true, none: null })).toEqual({
      text: `${"x".repeat(1000)}… (5000 chars)`,
      n: 3,
      ok: true,
      none: null,
    });
    expect(loggedInput("short")).toBe("short");
  });

  test("at most 100 items or members a level, and nothing below 8 levels is walked", () => {
    const many = Array.from({ length: 150 }, (_, i) => i);
    expect(loggedInput(many)).toHaveLength(100);
    const wide = Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`k${i}`, i]));
    expect(Object.keys(loggedInput(wide) as object)).toHaveLength(100);
    let deep: unknown = { leaf: "y".repeat(2000) };
    for (let i = 0; i < 12; i++) deep = { d: deep };
    let got = loggedInput(deep) as { d: unknown };
    for (let i = 0; i < 9; i++) got = got.d as { d: unknown };
    // Past the depth limit the value is kept as it is, not walked (and not copied).
    expect(JSON.stringify(got)).toContain("y".repeat(2000));
  });
});
