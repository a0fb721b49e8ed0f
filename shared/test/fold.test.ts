// The one fold of a session's events (shared/src/fold.ts), as tables:
// what the sidebar shows, whether a turn has settled, which annotations are
// anchored, and that folding twice or out of order changes nothing. Events
// are fixtures checked against the registry (tests/fixtures/events.ts); the
// few that do not fit their kind are marked so, on purpose.
import { describe, expect, test } from "bun:test";
import {
  activityOf,
  anchoredAnnotation,
  emptyTurn,
  Events,
  firstLine,
  foldTurn,
  settled,
  turnOk,
  type SessionActivity,
  type SessionEvent,
  type TurnState,
} from "../src/index.ts";
import { FIXTURE_AGENT, fixtureEvent } from "../../tests/fixtures/events.ts";

type Ev = { kind: string; data: unknown };
const events = (list: Ev[]): SessionEvent[] =>
  list.map((e, i) => ({ session: "ses_x", seq: i + 1, at: "2026-12-01T00:00:00.000Z", actor: FIXTURE_AGENT, ...e }));
const fold = (list: SessionEvent[], from: TurnState = emptyTurn()) => list.reduce(foldTurn, from);

const created = fixtureEvent(Events.sessionCreated, { box: "box_x", agent: "claude" });
const busy = fixtureEvent(Events.agentState, { state: "busy" });
const idle = fixtureEvent(Events.agentState, { state: "idle", reason: "the agent finished its turn" });
const failed = fixtureEvent(Events.agentState, { state: "error", reason: "boom" });
const asks = fixtureEvent(Events.attentionRequired, { reason: "approve?" });
const input = fixtureEvent(Events.inputSent, { text: "y\n" });
const exit0 = fixtureEvent(Events.execExited, { code: 0, signal: null });
const exit2 = fixtureEvent(Events.execExited, { code: 2, signal: null });
const started = (cmd: string) => fixtureEvent(Events.execStarted, { argv: [cmd] });
const output = fixtureEvent(Events.outputAppended, { chunk: 0, offset: 0, length: 3 });
const closed = fixtureEvent(Events.sessionClosed, {});
// Off-schema on purpose: what a broken or newer daemon could send, which a fold must not trust.
const offSchema = {
  unknownState: { kind: "agent.state", data: { state: "working" } },
  noData: { kind: "agent.state", data: null },
  exitWithoutCode: { kind: "exec.exited", data: {} },
};

describe("activityOf", () => {
  const cases: [string, Ev[], SessionActivity][] = [
    ["a shell with no agent events", [created, started("bash"), output], "idle"],
    ["the agent says busy", [busy], "busy"],
    ["a finished turn asks for the next input", [busy, idle, asks], "needs-input"],
    ["a failed turn stays failed when it asks for attention", [busy, failed, asks], "error"],
    ["and when its process exits afterwards", [busy, failed, asks, exit2], "error"],
    ["an answer clears needs-input", [busy, idle, asks, input], "idle"],
    ["an answer clears error", [busy, failed, asks, input], "idle"],
    ["typing while busy leaves it busy", [busy, input], "busy"],
    ["attention asked mid-turn", [busy, input, asks], "needs-input"],
    ["attention after the answer to attention", [busy, asks, input, asks], "needs-input"],
    ["needs-input said by the agent", [fixtureEvent(Events.agentState, { state: "needs-input" })], "needs-input"],
    ["a state the schema does not have changes nothing", [busy, offSchema.unknownState], "busy"],
    ["agent.state without data changes nothing", [idle, offSchema.noData], "idle"],
    [
      "messages and tools do not stand in for the agent's state",
      [
        idle,
        fixtureEvent(Events.messageStarted, { id: "m", role: "assistant" }),
        fixtureEvent(Events.toolCalled, { id: "t", name: "Bash", input: {} }),
      ],
      "idle",
    ],
    ["a process exit does not hide an error", [failed, exit0], "error"],
    ["closed is final", [busy, closed, busy], "closed"],
  ];
  test.each(cases)("%s", (_name, list, want) => {
    expect(activityOf(fold(events(list)))).toBe(want);
  });
});

describe("settled and turnOk", () => {
  const start = started("claude");
  const cases: [string, boolean, Ev[], boolean, boolean][] = [
    ["headless: attention but the process still runs", true, [input, start, idle, asks], false, true],
    ["headless: attention and exit", true, [input, start, idle, asks, exit0], true, true],
    ["headless: exited 2 after a clean turn", true, [input, start, idle, asks, exit2], true, false],
    ["headless: could not start (no process)", true, [input, failed, asks], true, false],
    ["terminal: attention is enough", false, [start, input, idle, asks], true, true],
    ["a new input after the last attention: not settled", false, [asks, input], false, true],
    ["busy after attention: not settled", false, [input, asks, busy], false, true],
    ["closed: settled", false, [input, closed], true, true],
  ];
  test.each(cases)("%s", (_name, headless, list, wantSettled, wantOk) => {
    const t = fold(events(list));
    expect(settled(t, headless)).toBe(wantSettled);
    expect(turnOk(t)).toBe(wantOk);
  });
});

describe("foldTurn", () => {
  const log = events([created, input, started("x"), busy, output, idle, asks, exit2, input, failed, asks]);

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
    for (const e of events([
      output,
      fixtureEvent(Events.annotationAdded, { text: "x" }),
      fixtureEvent(Events.boxStateChanged, { box: "b", state: "running" }),
    ])) {
      expect(foldTurn(t, e)).toBe(t);
    }
  });

  test("an event that does not fit its kind returns the same object", () => {
    const t = fold(log);
    for (const e of events(Object.values(offSchema))) expect(foldTurn(t, { ...e, seq: 100 })).toBe(t);
  });
});

describe("anchoredAnnotation", () => {
  const ev = (e: Ev) => events([e])[0]!;
  test("a line anchor", () => {
    expect(anchoredAnnotation(ev(fixtureEvent(Events.annotationAdded, { text: "look", anchor: { path: "src/a.ts", line: 4 } })))).toEqual({
      seq: 1,
      at: "2026-12-01T00:00:00.000Z",
      actor: FIXTURE_AGENT,
      text: "look",
      anchor: { path: "src/a.ts", line: 4 },
    });
  });
  test.each([
    ["a file without a line", fixtureEvent(Events.annotationAdded, { text: "file only", anchor: { path: "a.ts" } })],
    ["no anchor", fixtureEvent(Events.annotationAdded, { text: "free" })],
    ["another kind", fixtureEvent(Events.errorRaised, { message: "x" })],
    // Off-schema on purpose, as above.
    ["text that is not a string", { kind: "annotation.added", data: { text: 5, anchor: { path: "a.ts", line: 1 } } }],
    ["line 0", { kind: "annotation.added", data: { text: "x", anchor: { path: "a.ts", line: 0 } } }],
  ] as [string, Ev][])("%s: none", (_name, e) => {
    expect(anchoredAnnotation(ev(e))).toBeNull();
  });
});

describe("firstLine: how the sidebar names a session", () => {
  test.each([
    ["a headless prompt", ["fix the tests"], { text: "fix the tests", done: true }],
    ["`session send` (text and Enter)", ["make test\n", "ls\n"], { text: "make test", done: true }],
    ["keystrokes until Enter", ["l", "s", " ", "-", "l", "\r", "p", "w", "d", "\r"], { text: "ls -l", done: true }],
    ["a backspace takes a key back", ["l", "x", "\x7f", "s", "\r"], { text: "ls", done: true }],
    ["arrow keys and other escapes are dropped", ["\x1b[A", "g", "\x1bOB", "o", "\r"], { text: "go", done: true }],
    ["Enter on an empty line does not end it", ["\r", "v", "i", "\r"], { text: "vi", done: true }],
    ["still typing", ["c", "a"], { text: "ca", done: false }],
  ])("%s", (_, keys, want) => {
    expect(firstLine(keys)).toEqual(want);
  });

  test("no input: none; a long line is cut and final", () => {
    expect(firstLine([])).toBeUndefined();
    expect(firstLine(["x".repeat(500)])).toEqual({ text: "x".repeat(200), done: true });
  });
});
