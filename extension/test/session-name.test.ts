// How the sidebar names a session: what it is about and how old, never its id.
import { describe, expect, test } from "bun:test";
import { age, sessionDescription, sessionTitle, type Nameable } from "../src/session-name.ts";

const NOW = Date.parse("2026-12-03T12:00:00.000Z");
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();
const session = (over: Partial<Nameable>): Nameable => ({ id: "ses_01m8ydnr0586rsyt7jk0", agent: "claude", createdAt: ago(300), ...over });

describe("age", () => {
  test.each([
    [0, "just now"],
    [59, "just now"],
    [60, "1m ago"],
    [3599, "59m ago"],
    [3600, "1h ago"],
    [86_399, "23h ago"],
    [86_400, "1d ago"],
    [13 * 86_400, "13d ago"],
    [15 * 86_400, "2w ago"],
  ])("%i s is %s", (s, want) => expect(age(ago(s), NOW)).toBe(want));

  test("a clock behind the session's start says just now; a bad date says nothing", () => {
    expect(age(ago(-30), NOW)).toBe("just now");
    expect(age("not a date", NOW)).toBe("");
  });
});

describe("a session row", () => {
  test.each([
    ["the label first", { label: "review", first: "fix the tests" }, "review", "claude · 5m ago"],
    ["else the first prompt", { first: "fix the tests" }, "fix the tests", "claude · 5m ago"],
    ["else the first command of a shell", { agent: "shell", first: "make test" }, "make test", "shell · 5m ago"],
    ["a shell with nothing typed", { agent: "shell" }, "shell, nothing typed yet", "5m ago"],
    ["an agent with no prompt yet", { agent: "codex" }, "codex, no prompt yet", "5m ago"],
    ["a blank label is no label", { label: "  ", first: "go" }, "go", "claude · 5m ago"],
    ["a long prompt is one cut line", { first: `fix\n${"x".repeat(100)}` }, `fix ${"x".repeat(55)}…`, "claude · 5m ago"],
  ])("%s", (_, over, title, description) => {
    const s = session(over);
    expect(sessionTitle(s)).toBe(title);
    expect(sessionDescription(s, NOW)).toBe(description);
    expect(`${sessionTitle(s)} ${sessionDescription(s, NOW)}`).not.toContain("ses_");
  });
});
