// The conversation view's fold: a session's events in, the conversation the
// webview draws out. The same fold runs live and on a replay after a reload.
import { describe, expect, test } from "bun:test";
import { fold, newConversation, pending, type Conversation, type Ev } from "../src/conversation/fold.ts";

const user = { kind: "user" as const, id: "alice" };
const agent = { kind: "agent" as const, id: "alice/agent:claude" };
const ide = { kind: "ide" as const, id: "alice/ide:vscode" };

let seq = 0;
const ev = (kind: string, data: unknown, actor: Ev["actor"] = agent): Ev => ({
  seq: ++seq,
  at: "2026-12-04T00:00:00.000Z",
  actor,
  kind,
  data,
});

function run(headless: boolean, events: Ev[]): Conversation {
  const c = newConversation(headless);
  for (const e of events) fold(c, e);
  return c;
}

/** One headless turn that edits a file, as Claude Code's harness writes it. */
function turn(): Ev[] {
  seq = 0;
  return [
    ev("session.created", { box: "box_1", agent: "claude" }, user),
    ev("input.sent", { text: "in /workspace/notes.md replace old with new" }, ide),
    ev("agent.state", { state: "busy" }),
    ev("message.started", { id: "m1", role: "assistant" }),
    ev("message.delta", { id: "m1", text: "Let me " }),
    ev("message.delta", { id: "m1", text: "edit it." }),
    ev("message.completed", { id: "m1", role: "assistant", text: "Let me edit it." }),
    ev("tool.called", { id: "t1", name: "Edit", input: { file_path: "/workspace/notes.md", old_string: "old", new_string: "new" } }),
    ev("tool.completed", { id: "t1", output: "The file has been updated.", status: "ok" }),
    ev("message.completed", { id: "m2", role: "assistant", text: "Replaced `old` with **new**." }),
    ev("usage.reported", { available: true, input: 100, output: 20, cached: 5 }),
    ev("usage.reported", { available: true, input: 50, output: 10, cached: null }),
    ev("agent.state", { state: "idle" }),
  ];
}

describe("a headless turn", () => {
  test("the prompt with its sender, the streamed message, the edit with its diff, the turn's end and usage", () => {
    const c = run(true, turn());
    expect(c.items.map((i) => i.type)).toEqual(["prompt", "message", "tool", "message", "turn"]);
    const [prompt, first, tool, last, end] = c.items;
    expect(prompt).toMatchObject({ text: "in /workspace/notes.md replace old with new", actor: ide });
    expect(first).toMatchObject({ role: "assistant", text: "Let me edit it.", done: true });
    expect(tool).toMatchObject({
      name: "Edit",
      kind: "edit",
      title: "Edit /workspace/notes.md",
      status: "ok",
      output: "The file has been updated.",
      edits: [{ path: "/workspace/notes.md", oldText: "old", newText: "new" }],
    });
    expect(last).toMatchObject({ text: "Replaced `old` with **new**.", done: true });
    expect(end).toMatchObject({ type: "turn", state: "idle" });
    expect(c.state).toBe("idle");
    expect(c.usage).toEqual({ input: 150, output: 30, cached: 5, reports: 2 });
  });

  test("mid-stream, the message holds the deltas so far and the tool call runs", () => {
    const c = run(true, turn().slice(0, 8));
    expect(c.items.at(-2)).toMatchObject({ type: "message", text: "Let me edit it.", done: true });
    expect(c.items.at(-1)).toMatchObject({ type: "tool", status: "running", output: null });
    expect(c.state).toBe("busy");
    const streaming = run(true, turn().slice(0, 5));
    expect(streaming.items.at(-1)).toMatchObject({ type: "message", text: "Let me ", done: false });
  });

  test("a replay gives the same conversation, and events seen already are not folded twice", () => {
    const events = turn();
    const live = run(true, events);
    const again = newConversation(true);
    for (const e of [...events.slice(0, 6), ...events.slice(3)]) fold(again, e);
    expect(again.items).toEqual(live.items);
    expect(again.usage).toEqual(live.usage);
  });

  test("the headless agent's echo of the prompt as a user message is not a second prompt", () => {
    seq = 0;
    const c = run(true, [ev("input.sent", { text: "hi" }, user), ev("message.completed", { id: "u1", role: "user", text: "hi" })]);
    expect(c.items.map((i) => i.type)).toEqual(["prompt"]);
  });
});

describe("a terminal agent", () => {
  test("its prompts are its own user messages, not the keys typed into its terminal", () => {
    seq = 0;
    const c = run(false, [
      ev("input.sent", { text: "h" }, user),
      ev("input.sent", { text: "i\r" }, user),
      ev("message.started", { id: "u1", role: "user" }),
      ev("message.delta", { id: "u1", text: "hi" }),
      ev("message.completed", { id: "u1", role: "user", text: "hi" }),
      ev("message.completed", { id: "m1", role: "assistant", text: "Hello." }),
    ]);
    expect(c.items.map((i) => [i.type, "text" in i ? i.text : ""])).toEqual([
      ["prompt", "hi"],
      ["message", "Hello."],
    ]);
  });
});

describe("approvals, notes and errors", () => {
  test("an approval waits until it is decided, and names who decided", () => {
    seq = 0;
    const asked = ev("approval.requested", {
      id: "apr_00000000000000000001",
      kind: "tool",
      box: "box_1",
      session: "ses_1",
      summary: "the agent wants to use Bash to run: rm -rf data",
      digest: `sha256:${"a".repeat(64)}`,
      expiresAt: "2026-12-04T00:05:00.000Z",
    });
    const c = run(true, [asked]);
    expect(pending(c).map((a) => a.summary)).toEqual(["the agent wants to use Bash to run: rm -rf data"]);
    fold(
      c,
      ev(
        "approval.decided",
        { id: "apr_00000000000000000001", decision: "reject_once", digest: `sha256:${"a".repeat(64)}`, reason: "no" },
        ide,
      ),
    );
    expect(pending(c)).toEqual([]);
    expect(c.items[0]).toMatchObject({ decision: "reject_once", reason: "no", by: ide });
  });

  test("annotations with their anchor and errors are lines of their own; other kinds are not shown", () => {
    seq = 0;
    const c = run(true, [
      ev("annotation.added", { text: "look here", anchor: { path: "src/a.ts", line: 3 } }, user),
      ev("error.raised", { message: "the agent exited 1" }),
      ev("egress.allowed", { box: "b", host: "h", port: 443, bytesUp: 1, bytesDown: 1, ms: 1 }),
      ev("session.driver.acquired", { driver: ide }),
    ]);
    expect(c.items).toMatchObject([
      { type: "note", text: "look here", anchor: { path: "src/a.ts", line: 3 } },
      { type: "error", text: "the agent exited 1" },
    ]);
  });

  test("a stopped turn says who stopped it, not the agent's error as it stops", () => {
    seq = 0;
    const c = run(true, [
      ev("input.sent", { text: "take your time" }, ide),
      ev("agent.state", { state: "busy" }),
      ev("turn.interrupted", {}, ide),
      ev("error.raised", { message: "claude: error_during_execution", code: "agent" }),
      ev("agent.state", { state: "error", reason: "claude: error_during_execution" }),
      ev("input.sent", { text: "again" }, ide),
      ev("agent.state", { state: "busy" }),
      ev("error.raised", { message: "the model is overloaded" }),
      ev("agent.state", { state: "error", reason: "the model is overloaded" }),
    ]);
    expect(c.items.map((i) => i.type)).toEqual(["prompt", "stop", "turn", "prompt", "error", "turn"]);
    expect(c.items[1]).toMatchObject({ actor: ide });
    expect(c.items[2]).toMatchObject({ stoppedBy: ide });
    // The next turn's error is its own: shown, and its end is not a stop.
    expect(c.items[5]).toMatchObject({ stoppedBy: null, reason: "the model is overloaded" });
  });

  test("an event whose data does not fit its kind is left out", () => {
    seq = 0;
    const c = run(true, [
      ev("tool.called", { id: "t1", name: 7, input: {} }),
      ev("message.completed", { id: "m1", role: "assistant" }),
      ev("input.sent", { text: ["not", "text"] }, user),
    ]);
    expect(c.items).toEqual([]);
  });

  test("a log brought home shows the box's events as they were, with their actors", () => {
    seq = 0;
    const c = run(true, [
      ev(
        "session.event.imported",
        {
          from: { remote: "server", session: "ses_box", seq: 4 },
          at: "2026-12-03T00:00:00.000Z",
          actor: agent,
          kind: "message.completed",
          data: { id: "m9", role: "assistant", text: "done in the box" },
        },
        user,
      ),
    ]);
    expect(c.items).toMatchObject([{ type: "message", text: "done in the box", actor: agent, at: "2026-12-03T00:00:00.000Z" }]);
  });
});
