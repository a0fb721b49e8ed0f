// The one fold of a session's events (host/src/session/fold.ts), as tables:
// what the sidebar shows, whether a turn has settled, which annotations are
// anchored, and that folding twice or out of order changes nothing.
import { describe, expect, test } from "bun:test";
import type { SessionActivity, SessionEvent, TurnState } from "@hutch/shared";
import { activityOf, anchoredAnnotation, emptyTurn, foldTurn, settled, turnOk } from "../src/session/fold.ts";

type Ev = [kind: string, data?: unknown];
const events = (list: Ev[]): SessionEvent[] =>
  list.map(([kind, data], i) => ({ session: "ses_x", seq: i + 1, at: "2026-12-01T00:00:00.000Z", actor: { kind: "agent", id: "alice/agent:claude" }, kind, data: data ?? {} }));
const fold = (list: SessionEvent[], from: TurnState = emptyTurn()) => list.reduce(foldTurn, from);

const busy: Ev = ["agent.state", { state: "busy" }];
const idle: Ev = ["agent.state", { state: "idle", reason: "the agent finished its turn" }];
const failed: Ev = ["agent.state", { state: "error", reason: "boom" }];
const asks: Ev = ["attention.required", { reason: "approve?" }];
const input: Ev = ["input.sent", { text: "y\n" }];
const exit0: Ev = ["exec.exited", { code: 0, signal: null }];
const exit2: Ev = ["exec.exited", { code: 2, signal: null }];

describe("activityOf", () => {
  const cases: [string, Ev[], SessionActivity][] = [
    ["a shell with no agent events", [["session.created"], ["exec.started", { argv: ["bash"] }], ["output.appended", { chunk: 0, offset: 0, length: 3 }]], "idle"],
    ["the agent says busy", [busy], "busy"],
    ["a finished turn asks for the next input", [busy, idle, asks], "needs-input"],
    ["a failed turn stays failed when it asks for attention", [busy, failed, asks], "error"],
    ["and when its process exits afterwards", [busy, failed, asks, exit2], "error"],
    ["an answer clears needs-input", [busy, idle, asks, input], "idle"],
    ["an answer clears error", [busy, failed, asks, input], "idle"],
    ["typing while busy leaves it busy", [busy, input], "busy"],
    ["attention asked mid-turn", [busy, input, asks], "needs-input"],
    ["attention after the answer to attention", [busy, asks, input, asks], "needs-input"],
    ["needs-input said by the agent", [["agent.state", { state: "needs-input" }]], "needs-input"],
    ["a state the schema does not have changes nothing", [busy, ["agent.state", { state: "working" }]], "busy"],
    ["agent.state without data changes nothing", [idle, ["agent.state", null]], "idle"],
    ["messages and tools do not stand in for the agent's state", [idle, ["message.started", { id: "m", role: "assistant" }], ["tool.called", { id: "t", name: "Bash" }]], "idle"],
    ["a process exit does not hide an error", [failed, exit0], "error"],
    ["closed is final", [busy, ["session.closed"], busy], "closed"],
  ];
  test.each(cases)("%s", (_name, list, want) => {
    expect(activityOf(fold(events(list)))).toBe(want);
  });
});

describe("settled and turnOk", () => {
  const start: Ev = ["exec.started", { argv: ["claude"] }];
  const cases: [string, boolean, Ev[], boolean, boolean][] = [
    ["headless: attention but the process still runs", true, [input, start, idle, asks], false, true],
    ["headless: attention and exit", true, [input, start, idle, asks, exit0], true, true],
    ["headless: exited 2 after a clean turn", true, [input, start, idle, asks, exit2], true, false],
    ["headless: could not start (no process)", true, [input, failed, asks], true, false],
    ["terminal: attention is enough", false, [start, input, idle, asks], true, true],
    ["a new input after the last attention: not settled", false, [asks, input], false, true],
    ["busy after attention: not settled", false, [input, asks, busy], false, true],
    ["closed: settled", false, [input, ["session.closed"]], true, true],
  ];
  test.each(cases)("%s", (_name, headless, list, wantSettled, wantOk) => {
    const t = fold(events(list));
    expect(settled(t, headless)).toBe(wantSettled);
    expect(turnOk(t)).toBe(wantOk);
  });
});

describe("foldTurn", () => {
  const log = events([["session.created"], input, ["exec.started", { argv: ["x"] }], busy, ["output.appended"], idle, asks, exit2, input, failed, asks]);

  test("keeps the latest seq of each kind, the latest agent state and the latest exit", () => {
    expect(fold(log)).toEqual({
      input: 9,
      attention: 11,
      started: 3,
      exited: 8,
      closed: 0,
      agent: { seq: 10, state: "error", reason: "boom" },
      exit: { code: 2, signal: null },
    });
  });

  test("folding an event again, or in another order, changes nothing", () => {
    const once = fold(log);
    expect(fold(log, once)).toEqual(once);
    expect(fold([...log].reverse())).toEqual(once);
    expect(fold(log.slice(4), fold(log.slice(0, 6)))).toEqual(once);
  });

  test("an event that does not move the turn returns the same object", () => {
    const t = fold(log);
    for (const e of events([["output.appended"], ["annotation.added", { text: "x" }], ["box.state.changed", { box: "b", state: "running" }]])) {
      expect(foldTurn(t, e)).toBe(t);
    }
  });
});

describe("anchoredAnnotation", () => {
  const ev = (data: unknown, kind = "annotation.added") => events([[kind, data]])[0]!;
  test("a line anchor", () => {
    expect(anchoredAnnotation(ev({ text: "look", anchor: { path: "src/a.ts", line: 4 } }))).toEqual({
      seq: 1,
      at: "2026-12-01T00:00:00.000Z",
      actor: { kind: "agent", id: "alice/agent:claude" },
      text: "look",
      anchor: { path: "src/a.ts", line: 4 },
    });
  });
  test.each([
    ["a file without a line", { text: "file only", anchor: { path: "a.ts" } }, "annotation.added"],
    ["no anchor", { text: "free" }, "annotation.added"],
    ["another kind", { text: "x", anchor: { path: "a.ts", line: 1 } }, "error.raised"],
    ["text that is not a string", { text: 5, anchor: { path: "a.ts", line: 1 } }, "annotation.added"],
    ["line 0", { text: "x", anchor: { path: "a.ts", line: 0 } }, "annotation.added"],
  ])("%s: none", (_name, data, kind) => {
    expect(anchoredAnnotation(ev(data, kind))).toBeNull();
  });
});
