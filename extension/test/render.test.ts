// How the live log reads each event kind. Every case is an event built with
// the typed helpers and checked against the registry (tests/fixtures/events.ts),
// so a renderer that reads a field its kind does not have shows up here.
import { describe, expect, test } from "bun:test";
import { render, renderedKinds, type Output, type Rendered } from "../src/log/render.ts";
import { eventKinds, Events } from "@hutch/shared";
import { fixtureEvent as ev } from "../../tests/fixtures/events.ts";

const egress = { box: "box_1", host: "api.example", port: 443, bytesUp: 300, bytesDown: 1200, ms: 12 };
const cases: [
  { kind: string; data: unknown },
  { summary: string; tone?: Rendered["tone"]; detail?: RegExp; anchor?: Rendered["anchor"] },
][] = [
  [ev(Events.messageStarted, { id: "m1", role: "assistant" }), { summary: "assistant message m1 started", tone: "dim" }],
  [ev(Events.messageDelta, { id: "m1", text: "par" }), { summary: "… par", tone: "dim" }],
  [ev(Events.messageCompleted, { id: "m1", role: "assistant", text: "all done" }), { summary: "assistant: all done" }],
  [
    ev(Events.messageCompleted, { id: "m1:thinking", role: "reasoning", text: "hmm", truncated: true }),
    { summary: "reasoning: hmm (cut)" },
  ],
  [
    ev(Events.toolCalled, { id: "t1", name: "Write", input: { file_path: "/w/a" } }),
    { summary: "tool Write (t1)", detail: /"file_path": "\/w\/a"/ },
  ],
  [ev(Events.toolCompleted, { id: "t1", output: "boom", status: "error" }), { summary: "tool t1 error", tone: "error", detail: /boom/ }],
  [ev(Events.toolCompleted, { id: "t2", output: "fine", status: "ok" }), { summary: "tool t2 ok", tone: "ok", detail: /fine/ }],
  [
    ev(Events.mcpClientConnected, { name: "claude-code", version: "2.1.332" }),
    { summary: "mcp client claude-code 2.1.332 has the box's tools", tone: "dim" },
  ],
  [
    ev(Events.mcpToolCalled, { id: "c1", name: "browser_click", input: { ref: "e3" } }),
    { summary: "mcp browser_click (c1)", detail: /"ref": "e3"/ },
  ],
  [
    ev(Events.mcpToolCompleted, { id: "c1", name: "browser_click", status: "error", output: "e3 is stale", ms: 12 }),
    { summary: "mcp browser_click error in 12 ms", tone: "error", detail: /stale/ },
  ],
  [
    ev(Events.usageReported, { available: true, input: 10, output: 2, cached: null }),
    { summary: "usage: input 10, output 2, cached ?", tone: "dim" },
  ],
  [
    ev(Events.usageReported, { available: false, input: null, output: null, cached: null }),
    { summary: "usage: not reported", tone: "dim" },
  ],
  [ev(Events.turnInterrupted, {}), { summary: "the turn was stopped", tone: "warn" }],
  [ev(Events.agentState, { state: "busy" }), { summary: "agent is busy", tone: "dim" }],
  [
    ev(Events.agentState, { state: "idle", reason: "the agent finished its turn" }),
    { summary: "agent is idle: the agent finished its turn", tone: "dim" },
  ],
  [ev(Events.agentState, { state: "needs-input" }), { summary: "agent is needs-input", tone: "warn" }],
  [ev(Events.agentState, { state: "error", reason: "it exited 1" }), { summary: "agent is error: it exited 1", tone: "error" }],
  [
    ev(Events.agentRaw, { line: '{"type":"x"}', reason: "unknown" }),
    { summary: "agent output (raw, unknown)", tone: "dim", detail: /"type":"x"/ },
  ],
  [ev(Events.execStarted, { argv: ["bash", "-l"], pid: 7 }), { summary: "exec bash -l (pid 7)" }],
  [ev(Events.execExited, { code: 2, signal: null }), { summary: "exited with code 2", tone: "error" }],
  [ev(Events.execExited, { code: 0, signal: null }), { summary: "exited with code 0", tone: "ok" }],
  [ev(Events.execExited, { code: null, signal: "SIGKILL" }), { summary: "exited by signal SIGKILL", tone: "error" }],
  [
    ev(Events.annotationAdded, { text: "look", anchor: { path: "src/a.ts", line: 3 } }),
    { summary: "✎ look", tone: "note", anchor: { path: "src/a.ts", line: 3 } },
  ],
  [ev(Events.driverAcquired, { driver: { kind: "user", id: "a" }, leaseMs: 500 }), { summary: "driver: a took the slot (lease 500 ms)" }],
  [ev(Events.driverReleased, { driver: { kind: "user", id: "a" } }), { summary: "driver: a released the slot" }],
  [
    ev(Events.driverStolen, { from: { kind: "user", id: "a" }, to: { kind: "ide", id: "a/ide" } }),
    { summary: "driver: a/ide took the slot from a", tone: "warn" },
  ],
  [ev(Events.driverLapsed, { driver: { kind: "agent", id: "a/agent" } }), { summary: "driver: a/agent's lease lapsed", tone: "warn" }],
  [ev(Events.sessionCreated, { box: "box_1", agent: "claude", label: "review" }), { summary: "session created (claude, review)" }],
  [ev(Events.sessionClosed, { reason: "done" }), { summary: "session closed: done" }],
  [
    ev(Events.boxStateChanged, { box: "box_1", state: "failed", reason: "guest did not answer" }),
    { summary: "box is failed: guest did not answer", tone: "error" },
  ],
  [ev(Events.inputSent, { text: "ls\n" }), { summary: 'input "ls\\n"' }],
  [
    ev(Events.outputAppended, { chunk: 3, offset: 0, length: 12, snapshot: true }),
    { summary: "output 12 bytes (screen redraw)", tone: "dim" },
  ],
  [
    ev(Events.outputDropped, { fromChunk: 0, toChunk: 9, offset: 0, bytes: 8192, cap: "box", limit: 65536 }),
    { summary: "output 8192 bytes dropped (chunks 0-9, over the box cap of 65536 bytes)", tone: "warn" },
  ],
  [ev(Events.attentionRequired, { reason: "approve?" }), { summary: "needs attention: approve?", tone: "warn" }],
  [ev(Events.errorRaised, { message: "boom", code: "agent" }), { summary: "error: boom", tone: "error" }],
  [ev(Events.checkpointCreated, { name: "before", ref: "abc123" }), { summary: "checkpoint before (abc123)" }],
  [ev(Events.verdictRecorded, { verdict: "pass", score: 0.9, note: "ok" }), { summary: "verdict pass (0.9)", detail: /ok/ }],
  [
    ev(Events.dispatchStarted, { dispatch: "dsp_1", snapshot: "snap_1", k: 3, check: "bun test", task: "fix it" }),
    { summary: "dispatch dsp_1: 3 workers from snap_1, check bun test" },
  ],
  [ev(Events.dispatchWorkerStarted, { worker: 2, agent: "codex", box: "dsp-x-w2" }), { summary: "worker 2 (codex) in box dsp-x-w2" }],
  [
    ev(Events.dispatchFinished, { status: "done", winner: 2, usage: { input: 1, output: 2 } }),
    { summary: "dispatch done: worker 2 won", tone: "ok" },
  ],
  [
    ev(Events.dispatchFinished, { status: "interrupted", winner: null, reason: "daemon stopped", usage: { input: 0, output: 0 } }),
    { summary: "dispatch interrupted: no winner (daemon stopped)", tone: "warn" },
  ],
  [
    ev(Events.scheduleRunStarted, { schedule: "sch_1", trigger: "cron", box: "box_1", agent: "claude", woke: true, wakeMs: 850 }),
    { summary: "schedule sch_1 (cron): claude in box box_1, woke it in 850 ms", tone: "note" },
  ],
  [
    ev(Events.scheduleRunFinished, {
      schedule: "sch_1",
      status: "ok",
      exit: 0,
      ms: 4200,
      tokens: { input: 120, output: 30 },
      boxSeconds: 5.1,
    }),
    { summary: "schedule sch_1 run ok (exit 0) after 4 s, box awake 5 s, 120 in / 30 out tokens", tone: "ok" },
  ],
  [
    ev(Events.scheduleRunFinished, {
      schedule: "sch_1",
      status: "timeout",
      exit: null,
      ms: 60000,
      tokens: null,
      boxSeconds: 61,
      reason: "ran past --max-run 60s",
    }),
    { summary: "schedule sch_1 run timeout after 60 s, box awake 61 s: ran past --max-run 60s", tone: "warn" },
  ],
  [
    ev(Events.egressDenied, { ...egress, bytesUp: 0, bytesDown: 0, status: 403, reason: "not allowlisted" }),
    { summary: "egress denied api.example:443 → 403, 0 bytes up, 0 down (not allowlisted)", tone: "error" },
  ],
  [
    ev(Events.egressAllowed, { ...egress, method: "CONNECT", status: 200 }),
    { summary: "egress allowed api.example:443 CONNECT → 200, 300 bytes up, 1200 down", tone: "ok" },
  ],
  [
    ev(Events.egressInjected, { ...egress, binding: "anthropic", method: "POST", path: "/v1/messages", status: 200 }),
    { summary: "egress injected api.example:443 anthropic POST /v1/messages → 200, 300 bytes up, 1200 down", tone: "warn" },
  ],
  [
    ev(Events.egressDenied, { ...egress, host: "", port: 0, bytesUp: 0, bytesDown: 0, status: 503, reason: "2 connections refused" }),
    { summary: "egress denied the broker → 503, 0 bytes up, 0 down (2 connections refused)", tone: "error" },
  ],
  [
    ev(Events.approvalRequested, {
      id: "apr_00000000000000000001",
      kind: "credential",
      box: "box_1",
      session: "ses_1",
      summary: "POST api.github.com/repos/o/r/issues (github), 12 bytes",
      digest: `sha256:${"a".repeat(64)}`,
      expiresAt: "2026-12-01T10:10:00.000Z",
    }),
    {
      summary: "approval apr_00000000000000000001 asked (credential): POST api.github.com/repos/o/r/issues (github), 12 bytes",
      tone: "warn",
    },
  ],
  [
    ev(Events.approvalDecided, {
      id: "apr_00000000000000000001",
      decision: "reject_always",
      digest: `sha256:${"a".repeat(64)}`,
      reason: "no",
    }),
    { summary: "approval apr_00000000000000000001 reject always: no", tone: "warn" },
  ],
  [
    ev(Events.approvalRefused, { id: "apr_00000000000000000001", reason: "a box cannot decide its own approvals" }),
    { summary: "approval apr_00000000000000000001: a decision was refused (a box cannot decide its own approvals)", tone: "error" },
  ],
  [
    ev(Events.sessionEventImported, {
      from: { remote: "big", session: "ses_r", seq: 7 },
      at: "2026-12-01T10:00:00.000Z",
      actor: { kind: "agent", id: "alice/agent:claude" },
      kind: "error.raised",
      data: { message: "boom" },
    }),
    { summary: "[big ses_r #7, alice/agent:claude] error: boom", tone: "error" },
  ],
  [
    ev(Events.sessionEventImported, {
      from: { remote: "big", session: "ses_r", seq: 8 },
      at: "2026-12-01T10:00:01.000Z",
      actor: { kind: "user", id: "alice" },
      kind: "annotation.added",
      data: { text: "looks right" },
    }),
    { summary: "[big ses_r #8, alice] ✎ looks right", tone: "dim" },
  ],
  [
    ev(Events.sessionWorkReturned, { box: "web", remote: "big", case: "merge", sessions: ["ses_r"], events: 12 }),
    { summary: "work of box web on big came home (merge); 12 events of 1 session above", tone: "ok" },
  ],
  [
    ev(Events.sessionMoved, { to: { remote: "big", session: "ses_r", box: "web" } }),
    { summary: "moved to big: session ses_r in box web goes on there", tone: "note" },
  ],
  [
    ev(Events.sessionArrived, { from: { remote: "laptop", session: "ses_l", box: "web" }, events: 30 }),
    { summary: "arrived from laptop (session ses_l, box web); its 30 events are above", tone: "note" },
  ],
  [
    ev(Events.boxSlept, { box: "box_1", keeps: "memory", programsStopped: false, bytes: 2048, ms: 900, by: { kind: "user", id: "alice" } }),
    { summary: "box asleep, programs kept, 2048 bytes in 900 ms (by alice)", tone: "dim" },
  ],
  [
    ev(Events.boxSlept, { box: "box_1", keeps: "disk", programsStopped: true, bytes: 0, ms: 40 }),
    { summary: "box asleep (its programs were stopped; agents resume on wake), 0 bytes in 40 ms", tone: "warn" },
  ],
  [ev(Events.boxWoke, { box: "box_1", ms: 300, programsKept: true }), { summary: "box woke in 300 ms, programs kept", tone: "dim" }],
  [
    ev(Events.boxWokeCold, { box: "box_1", reason: "the sleeping state is torn" }),
    { summary: "box booted afresh on wake, its programs lost: the sleeping state is torn", tone: "warn" },
  ],
  [
    ev(Events.boxMoved, { box: "box_1", from: "a", to: "b", reason: "failover", snapshot: "snap_1", programsKept: false, epoch: 2 }),
    { summary: "box moved from a to b (failover: a went down), from snapshot snap_1; its programs started afresh", tone: "warn" },
  ],
  [
    ev(Events.boxMoved, {
      box: "box_1",
      from: "b",
      to: "c",
      reason: "move",
      programsKept: true,
      epoch: 3,
      by: { kind: "user", id: "alice" },
    }),
    { summary: "box moved from b to c (move), programs kept (by alice)", tone: "dim" },
  ],
];

describe("render", () => {
  for (const [e, want] of cases) {
    test(`${e.kind} ${JSON.stringify(e.data)}`, () => {
      const r = render(e);
      expect(r.summary).toBe(want.summary);
      if (want.tone) expect(r.tone).toBe(want.tone);
      if (want.detail) expect(r.detail).toMatch(want.detail);
      if (want.anchor) expect(r.anchor).toEqual(want.anchor);
    });
  }

  test("every kind with its own rendering has a case above", () => {
    const covered = new Set(cases.map(([e]) => e.kind));
    expect(renderedKinds().filter((k) => !covered.has(k))).toEqual([]);
  });

  test("a long message keeps its full text in the detail and a one-line summary", () => {
    const text = `line one\nline two ${"x".repeat(300)}`;
    const r = render(ev(Events.messageCompleted, { id: "m1", role: "assistant", text }));
    expect(r.summary.length).toBeLessThan(230);
    expect(r.summary).not.toContain("\n");
    expect(r.detail).toBe(text);
  });

  // Not fixtures: what a broken or newer daemon could send, which the view must not trust.
  test("a known kind whose data does not fit its schema is shown as such, not read as if it fitted", () => {
    const r = render({ kind: "egress.allowed", data: { host: "api.example", port: 443, bytes: 1200 } });
    expect(r).toMatchObject({ summary: "egress.allowed that does not fit its schema", tone: "error" });
    expect(r.detail).toContain('"bytes": 1200');
    expect(render({ kind: "exec.exited", data: null }).summary).toBe("exec.exited that does not fit its schema");
  });

  test("a kind the extension does not know reads as its kind and JSON", () => {
    expect(render({ kind: "some.future.kind", data: { x: 1 } })).toMatchObject({
      summary: "some.future.kind",
      tone: "dim",
      detail: '{\n  "x": 1\n}',
    });
    expect(render({ kind: "mystery.kind", data: "plain" }).detail).toBe('"plain"');
  });
});

describe("what others wrote is shown escaped", () => {
  // OSC 52 clipboard write, title change, screen clear, full reset, C1 CSI, bidi override.
  const HOSTILE = "\x1b]52;c;aGk=\x07 \x1b]0;t\x07 \x1b[2J \x1bc \u009b2J \u202eevil";
  const SHOWN = "\\x1b]52;c;aGk=\\x07 \\x1b]0;t\\x07 \\x1b[2J \\x1bc \\x9b2J \\u202eevil";
  const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

  test("an annotation: the summary and detail are escaped, the anchor is kept as logged to open it", () => {
    const text = `${HOSTILE}\n${"x".repeat(200)}`;
    const r = render(ev(Events.annotationAdded, { text, anchor: { path: "src/\u202ea.ts", line: 2 } }));
    expect(r.summary.startsWith(`✎ ${SHOWN} x`)).toBe(true);
    expect(r.summary).not.toMatch(RAW);
    expect(r.detail).toBe(`${SHOWN}\n${"x".repeat(200)}`);
    expect(r.anchor).toEqual({ path: "src/\u202ea.ts", line: 2 });
  });

  test.each([
    ev(Events.messageCompleted, { id: "m1", role: "assistant", text: `one\n${HOSTILE}` }),
    ev(Events.toolCompleted, { id: "t1", output: HOSTILE, status: "ok" }),
    ev(Events.toolCalled, { id: "t1", name: "Bash", input: { command: HOSTILE } }),
    ev(Events.agentRaw, { line: HOSTILE, reason: "stderr" }),
    ev(Events.errorRaised, { message: HOSTILE }),
    ev(Events.boxStateChanged, { box: "box_1", state: "failed", reason: `${HOSTILE}${"y".repeat(300)}` }),
  ])("$kind", (e) => {
    const r = render(e);
    expect(r.summary).not.toMatch(RAW);
    expect(r.summary).not.toContain("\n");
    if (r.detail !== undefined) expect(r.detail).not.toMatch(RAW);
    // Text shows ESC as \x1b; JSON (a tool's input) as its own \u001b, escaped in turn.
    expect(`${r.summary}\n${r.detail ?? ""}`).toMatch(/\\x1b\]52;c;aGk=|\\\\u001b\]52;c;aGk=/);
  });

  test("an event imported from another daemon is escaped once", () => {
    const r = render(
      ev(Events.sessionEventImported, {
        from: { remote: "big\x1bc", session: "ses_r", seq: 1 },
        at: "2026-12-01T10:00:00.000Z",
        actor: { kind: "user", id: "bob" },
        kind: "error.raised",
        data: { message: HOSTILE },
      }),
    );
    expect(r.summary).toBe(`[big\\x1bc ses_r #1, bob] error: ${SHOWN}`);
  });
});

test("every registered kind has its own rendering (a new kind would otherwise read as JSON)", () => {
  expect(eventKinds().filter((k) => !renderedKinds().includes(k))).toEqual([]);
});

describe("a terminal's output reads as the text it printed (as the bridge read it), not its size", () => {
  const out = ev(Events.outputAppended, { chunk: 3, offset: 0, length: 32 });
  test.each([
    ["one line", { text: "hello\n" }, { summary: "│ hello" }],
    [
      "several lines: the first, and how many more; the whole text as detail",
      { text: "a\nb\nc\n" },
      { summary: "│ a  (+2 lines)", detail: "a\nb\nc" },
    ],
    ["blank lines are not counted", { text: "\n\nok\n\n" }, { summary: "│ ok" }],
    ["only cursor movement", { text: "" }, { summary: "output: (no text; cursor or screen control only)", tone: "dim" }],
    ["cut", { text: "x\ny", cut: true }, { summary: "│ x  (+more)", detail: "x\ny\n… (cut)" }],
    ["dropped", { text: "", dropped: true }, { summary: "output: 32 bytes, dropped under the session's output cap", tone: "warn" }],
    // What is left after stripping is still someone else's: escaped like every row.
    ["controls left in it are escaped", { text: "bell\x07 \u202eevil\n" }, { summary: "│ bell\\x07 \\u202eevil" }],
  ] as [string, Output, Partial<Rendered>][])("%s", (_, o, want) => {
    const r = render(out, o);
    expect(r.summary).toBe(want.summary!);
    if (want.tone) expect(r.tone).toBe(want.tone);
    if (want.detail) expect(r.detail).toBe(want.detail);
    else if (!o.cut) expect(r.detail === undefined || !want.detail).toBe(true);
  });

  test("without its text (an older bridge), a row says its size; a screen redraw stays a redraw", () => {
    expect(render(out).summary).toBe("output 32 bytes");
    expect(render(ev(Events.outputAppended, { chunk: 3, offset: 0, length: 12, snapshot: true }), { text: "x" }).summary).toBe(
      "output 12 bytes (screen redraw)",
    );
  });
});
