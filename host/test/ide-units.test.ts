// The bridge's pure parts as tables: activity folding and anchor → file URI.
// Events are built with the typed helpers and checked against the registry
// (tests/fixtures/events.ts), so a table cannot hold a shape the daemon never logs.
import { describe, expect, test } from "bun:test";
import { Events, type EventData, type SessionActivity, type SessionEvent } from "@hutch/shared";
import { nextActivity } from "../src/ide/activity.ts";
import { anchorUri, annotationDiagnostic } from "../src/ide/anchors.ts";
import { fixtureLog } from "../../tests/fixtures/events.ts";

const ev = fixtureLog("ses_x");

describe("nextActivity", () => {
  const cases: [SessionActivity, SessionEvent, SessionActivity][] = [
    ["idle", ev(Events.messageStarted, { id: "m1", role: "assistant" }), "busy"],
    ["busy", ev(Events.messageCompleted, { id: "m1", role: "assistant", text: "done" }), "idle"],
    ["idle", ev(Events.toolCalled, { id: "t1", name: "Write", input: { file_path: "a" } }), "busy"],
    ["busy", ev(Events.attentionRequired, { reason: "approve?" }), "needs-input"],
    ["error", ev(Events.attentionRequired, { reason: "the turn failed" }), "error"],
    ["needs-input", ev(Events.inputSent, { text: "y\n" }), "idle"],
    ["error", ev(Events.inputSent, { text: "try again\n" }), "idle"],
    ["busy", ev(Events.inputSent, { text: "x" }), "busy"],
    ["busy", ev(Events.execExited, { code: 0, signal: null }), "idle"],
    ["busy", ev(Events.sessionClosed, {}), "closed"],
    ["closed", ev(Events.messageStarted, { id: "m2", role: "assistant" }), "closed"],
    ["idle", ev(Events.outputAppended, { chunk: 0, offset: 0, length: 3 }), "idle"],
  ];
  for (const [before, e, after] of cases) {
    test(`${before} + ${e.kind} ${JSON.stringify(e.data)} → ${after}`, () => expect(nextActivity(before, e)).toBe(after));
  }

  // Keyed by the schema's own states: a state added to agent.state is a type error here until it has a row.
  const states: Record<EventData<"agent.state">["state"], SessionActivity> = { busy: "busy", idle: "idle", "needs-input": "needs-input", error: "error" };
  test.each(Object.entries(states))("agent.state %s → %s", (state, activity) => {
    const e = ev(Events.agentState, { state: state as EventData<"agent.state">["state"], reason: "r" });
    expect(nextActivity(activity === "busy" ? "idle" : "busy", e)).toBe(activity);
  });

  test("an event whose data does not fit its kind changes nothing", () => {
    // Not a fixture: what a broken or newer daemon could send, which the bridge must not trust.
    expect(nextActivity("busy", { kind: "agent.state", data: { state: "waiting" } })).toBe("busy");
    expect(nextActivity("busy", { kind: "agent.state", data: null })).toBe("busy");
    expect(nextActivity("idle", { kind: "message.started", data: {} })).toBe("idle");
  });
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
  const note = (data: EventData<"annotation.added">) => ({ ...ev(Events.annotationAdded, data), seq: 7 });
  test("a line anchor becomes an information diagnostic on that line", () => {
    const d = annotationDiagnostic("/p", note({ text: "look", anchor: { path: "a.ts", line: 4 } }), "review")!;
    expect(d.uri).toBe("file:///p/a.ts");
    expect(d.diagnostic.severity).toBe(3);
    expect(d.diagnostic.range.start).toEqual({ line: 3, character: 0 });
    expect(d.diagnostic.message).toBe("look (alice, review)");
    expect(d.diagnostic.code).toBe("ses_x#7");
  });
  test("no line, no anchor, another kind or bad data: nothing", () => {
    expect(annotationDiagnostic("/p", note({ text: "file only", anchor: { path: "a.ts" } }), "s")).toBeNull();
    expect(annotationDiagnostic("/p", note({ text: "free" }), "s")).toBeNull();
    expect(annotationDiagnostic("/p", ev(Events.errorRaised, { message: "x" }), "s")).toBeNull();
    // Off-schema on purpose (text is not a string): what the bridge must not trust.
    expect(annotationDiagnostic("/p", { ...note({ text: "x" }), data: { text: 5, anchor: { path: "a.ts", line: 1 } } }, "s")).toBeNull();
  });
});
