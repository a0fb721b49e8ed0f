// How the live log reads each event kind, including kinds other branches add
// (agent messages, tools, egress): keyed on the kind string, unknown kinds as
// kind + JSON.
import { describe, expect, test } from "bun:test";
import { render, renderedKinds, type Rendered } from "../src/log/render.ts";
import { eventKinds } from "@hutch/shared";

describe("render", () => {
  const cases: [string, unknown, { summary: string; tone?: Rendered["tone"]; detail?: RegExp; anchor?: Rendered["anchor"] }][] = [
    ["message.completed", { role: "assistant", text: "all done" }, { summary: "assistant: all done" }],
    ["message.delta", { role: "assistant", text: "par" }, { summary: "assistant … par", tone: "dim" }],
    ["tool.called", { id: "t1", name: "Write", input: { file_path: "/w/a" } }, { summary: "tool Write (t1)", detail: /"file_path": "\/w\/a"/ }],
    ["tool.completed", { id: "t1", output: "boom", status: "error" }, { summary: "tool t1 error", tone: "error", detail: /boom/ }],
    ["tool.completed", { id: "t2", output: { ok: true }, status: "ok" }, { summary: "tool t2 ok", tone: "ok", detail: /"ok": true/ }],
    ["exec.exited", { code: 2, signal: null }, { summary: "exited with code 2", tone: "error" }],
    ["exec.exited", { code: 0, signal: null }, { summary: "exited with code 0", tone: "ok" }],
    ["exec.exited", { code: null, signal: "SIGKILL" }, { summary: "exited by signal SIGKILL", tone: "error" }],
    ["annotation.added", { text: "look", anchor: { path: "src/a.ts", line: 3 } }, { summary: "✎ look", tone: "note", anchor: { path: "src/a.ts", line: 3 } }],
    ["session.driver.stolen", { from: { kind: "user", id: "a" }, to: { kind: "ide", id: "a/ide" } }, { summary: "driver: a/ide took the slot from a", tone: "warn" }],
    ["egress.denied", { host: "evil.example", port: 443, reason: "not allowlisted" }, { summary: "egress denied evil.example:443 (not allowlisted)", tone: "error" }],
    ["egress.allowed", { host: "api.example", port: 443, bytes: 1200 }, { summary: "egress allowed api.example:443 1200 bytes", tone: "ok" }],
    ["egress.injected", { host: "api.example", port: 443 }, { summary: "egress injected api.example:443", tone: "warn" }],
    ["agent.state", { state: "waiting" }, { summary: "agent is waiting", tone: "warn" }],
    ["some.future.kind", { x: 1 }, { summary: "some.future.kind", tone: "dim", detail: /"x": 1/ }],
  ];
  for (const [kind, data, want] of cases) {
    test(`${kind} ${JSON.stringify(data)}`, () => {
      const r = render(kind, data);
      expect(r.summary).toBe(want.summary);
      if (want.tone) expect(r.tone).toBe(want.tone);
      if (want.detail) expect(r.detail).toMatch(want.detail);
      if (want.anchor) expect(r.anchor).toEqual(want.anchor);
    });
  }
  test("a long message keeps its full text in the detail and a one-line summary", () => {
    const text = "line one\nline two " + "x".repeat(300);
    const r = render("message.completed", { role: "assistant", text });
    expect(r.summary.length).toBeLessThan(230);
    expect(r.summary).not.toContain("\n");
    expect(r.detail).toBe(text);
  });
  test("data that is not an object still renders", () => {
    expect(render("mystery.kind", "plain").detail).toBe('"plain"');
    expect(render("exec.exited", null).summary).toBe("exited");
  });
});

test("every kind with its own rendering is a registered event kind (a renamed kind would silently render generically)", () => {
  const registered = new Set(eventKinds());
  expect(renderedKinds().filter((k) => !registered.has(k))).toEqual([]);
});
