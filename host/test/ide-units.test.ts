// The bridge's pure parts as tables: activity folding and anchor → file URI.
import { describe, expect, test } from "bun:test";
import type { SessionActivity, SessionEvent } from "@hutch/shared";
import { nextActivity } from "../src/ide/activity.ts";
import { anchorUri, annotationDiagnostic } from "../src/ide/anchors.ts";

describe("nextActivity", () => {
  const cases: [SessionActivity, string, unknown, SessionActivity][] = [
    ["idle", "message.started", { role: "assistant" }, "busy"],
    ["busy", "message.completed", { role: "assistant", text: "done" }, "idle"],
    ["idle", "tool.called", { id: "t1", name: "Write" }, "busy"],
    ["busy", "attention.required", { reason: "approve?" }, "needs-input"],
    ["needs-input", "input.sent", { text: "y\n" }, "idle"],
    ["busy", "input.sent", { text: "x" }, "busy"],
    ["idle", "agent.state", { state: "working" }, "busy"],
    ["busy", "agent.state", { state: "waiting" }, "needs-input"],
    ["busy", "agent.state", { state: "something-new" }, "busy"],
    ["busy", "agent.state", null, "busy"],
    ["busy", "exec.exited", { code: 0, signal: null }, "idle"],
    ["busy", "session.closed", {}, "closed"],
    ["closed", "message.started", {}, "closed"],
    ["idle", "output.appended", { chunk: 0, offset: 0, length: 3 }, "idle"],
  ];
  for (const [before, kind, data, after] of cases) {
    test(`${before} + ${kind} ${JSON.stringify(data)} → ${after}`, () => expect(nextActivity(before, kind, data)).toBe(after));
  }
});

describe("anchorUri", () => {
  const cases: [string | null, string, string | null][] = [
    ["/home/a/proj", "src/a.ts", "file:///home/a/proj/src/a.ts"],
    ["/home/a/proj", "/workspace/src/a.ts", "file:///home/a/proj/src/a.ts"],
    ["/home/a/proj", "/home/a/proj/src/a.ts", "file:///home/a/proj/src/a.ts"],
    ["/home/a/proj", "./src/../b.ts", "file:///home/a/proj/b.ts"],
    ["/home/a/proj", "../outside.ts", null],
    ["/home/a/proj", "/etc/passwd", null],
    ["/home/a/proj", "/workspacex/a.ts", null],
    [null, "src/a.ts", null],
    ["/home/a/my proj", "a b.ts", "file:///home/a/my%20proj/a%20b.ts"],
  ];
  for (const [root, path, uri] of cases) test(`${root} + ${path} → ${uri}`, () => expect(anchorUri(root, { path })).toBe(uri));
});

describe("annotationDiagnostic", () => {
  const ev = (data: unknown, kind = "annotation.added"): SessionEvent => ({ session: "ses_x", seq: 7, at: "", actor: { kind: "user", id: "alice" }, kind, data });
  test("a line anchor becomes an information diagnostic on that line", () => {
    const d = annotationDiagnostic("/p", ev({ text: "look", anchor: { path: "a.ts", line: 4 } }), "review")!;
    expect(d.uri).toBe("file:///p/a.ts");
    expect(d.diagnostic.severity).toBe(3);
    expect(d.diagnostic.range.start).toEqual({ line: 3, character: 0 });
    expect(d.diagnostic.message).toBe("look (alice, review)");
    expect(d.diagnostic.code).toBe("ses_x#7");
  });
  test("no line, no anchor, another kind or bad data: nothing", () => {
    expect(annotationDiagnostic("/p", ev({ text: "file only", anchor: { path: "a.ts" } }), "s")).toBeNull();
    expect(annotationDiagnostic("/p", ev({ text: "free" }), "s")).toBeNull();
    expect(annotationDiagnostic("/p", ev({ text: "x", anchor: { path: "a.ts", line: 1 } }, "error.raised"), "s")).toBeNull();
    expect(annotationDiagnostic("/p", ev({ text: 5, anchor: { path: "a.ts", line: 1 } }), "s")).toBeNull();
  });
});
