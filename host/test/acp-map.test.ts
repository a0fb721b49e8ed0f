// The ACP mapping as data: session events in, `session/update`s out. The
// recorded streams of the real agent CLIs go through their harness's mapper
// and then through the ACP fold, as they do in `hutch acp`.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { emit, Events, pathMapper, planOf, toolKind, toolTitle, type Actor, type SessionEvent, type TypedEvent } from "@hutch/shared";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { harness } from "../src/harness/index.ts";
import { newMapState, toolDiffs, updatesOf, type MapOptions } from "../src/acp/map.ts";
import { actorName, promptText, requestError } from "../src/acp/agent.ts";
import { HutchError } from "@hutch/shared/base";

const FIXTURES = join(import.meta.dir, "..", "..", "tests", "fixtures", "agents");
const AGENT: Actor = { kind: "agent", id: "alice/agent:claude" };
const IDE: Actor = { kind: "ide", id: "alice/ide:acp.zed" };

function log(events: (TypedEvent & { actor?: Actor })[]): SessionEvent[] {
  return events.map((e, i) => ({
    session: "ses_x",
    seq: i + 1,
    at: "2026-01-01T00:00:00.000Z",
    actor: e.actor ?? AGENT,
    kind: e.kind,
    data: e.data,
  }));
}

function fold(events: SessionEvent[], o: MapOptions = { headless: true }): SessionUpdate[] {
  const state = newMapState();
  return events.flatMap((e) => updatesOf(e, state, o));
}

const text = (u: SessionUpdate) =>
  "content" in u && u.content && !Array.isArray(u.content) && u.content.type === "text" ? u.content.text : "";

describe("a recorded agent turn as ACP updates", () => {
  test.each(["claude", "codex", "opencode", "pi"])(
    "%s: the prompt, a tool call then its result, and the final answer, in order",
    (name) => {
      const m = harness(name).mapper();
      const lines = readFileSync(join(FIXTURES, `${name}.ndjson`), "utf8")
        .split("\n")
        .filter(Boolean);
      const mapped = [...lines.flatMap((l) => m.line(l)), ...m.end({ code: 0, signal: null })];
      const events = log([{ ...emit(Events.inputSent, { text: "create hello.txt containing hi" }), actor: IDE }, ...mapped]);
      const ups = fold(events);
      const kinds = ups.map((u) => u.sessionUpdate);
      expect(kinds[0]).toBe("user_message_chunk");
      expect(text(ups[0]!)).toBe("create hello.txt containing hi");
      const call = kinds.indexOf("tool_call");
      const result = kinds.indexOf("tool_call_update");
      expect(call).toBeGreaterThan(0);
      expect(result).toBeGreaterThan(call);
      expect(ups[call]).toMatchObject({ kind: "execute", status: "in_progress" });
      expect(ups[result]).toMatchObject({ status: "completed" });
      // The answer is shown once, whether it streamed as deltas or came whole (errors, such as Codex's warning, are their own messages).
      const said = ups
        .filter((u) => u.sessionUpdate === "agent_message_chunk" && !u.messageId?.startsWith("error-"))
        .map(text)
        .join("");
      expect(said).toBe('Created hello.txt containing "hi".');
      expect(kinds.lastIndexOf("agent_message_chunk")).toBeGreaterThan(result);
      // Every update names its event, and they come in seq order.
      const seqs = ups.map((u) => (u._meta as { hutch: { seq: number } }).hutch.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect((ups[0]!._meta as { hutch: { actor: Actor } }).hutch.actor).toEqual(IDE);
    },
  );
});

describe("updatesOf", () => {
  test("deltas stream as chunks of their message; its completion is not shown again; reasoning is a thought", () => {
    const ups = fold(
      log([
        emit(Events.messageStarted, { id: "m1", role: "reasoning" }),
        emit(Events.messageDelta, { id: "m1", text: "think" }),
        emit(Events.messageCompleted, { id: "m1", role: "reasoning", text: "think" }),
        emit(Events.messageStarted, { id: "m2", role: "assistant" }),
        emit(Events.messageDelta, { id: "m2", text: "he" }),
        emit(Events.messageDelta, { id: "m2", text: "llo" }),
        emit(Events.messageCompleted, { id: "m2", role: "assistant", text: "hello" }),
        emit(Events.messageCompleted, { id: "m3", role: "assistant", text: "whole" }),
      ]),
    );
    expect(ups.map((u) => [u.sessionUpdate, text(u), "messageId" in u ? u.messageId : null])).toEqual([
      ["agent_thought_chunk", "think", "m1"],
      ["agent_message_chunk", "he", "m2"],
      ["agent_message_chunk", "llo", "m2"],
      ["agent_message_chunk", "whole", "m3"],
    ]);
  });

  test("a headless session's prompt is its input; a terminal session's is the agent's own user message (its input is keystrokes)", () => {
    const events = log([
      { ...emit(Events.inputSent, { text: "hi\r" }), actor: IDE },
      emit(Events.messageCompleted, { id: "u1", role: "user", text: "hi" }),
    ]);
    expect(fold(events, { headless: true }).map((u) => [u.sessionUpdate, text(u)])).toEqual([["user_message_chunk", "hi\r"]]);
    expect(fold(events, { headless: false }).map((u) => [u.sessionUpdate, text(u)])).toEqual([["user_message_chunk", "hi"]]);
  });

  test("a file edit is a diff at the editor's path, kept when it completes; a failed tool shows its output; an error is said", () => {
    const local = pathMapper("/workspace/app", "/home/me/app");
    const ups = fold(
      log([
        emit(Events.toolCalled, { id: "t1", name: "Edit", input: { file_path: "/workspace/app/a.ts", old_string: "x", new_string: "y" } }),
        emit(Events.toolCompleted, { id: "t1", output: "ok", status: "ok" }),
        emit(Events.toolCalled, { id: "t2", name: "Bash", input: { command: "false", description: "fail" } }),
        emit(Events.toolCompleted, { id: "t2", output: "exit 1", status: "error" }),
        emit(Events.errorRaised, { message: "the model is overloaded" }),
      ]),
      { headless: true, localPath: local },
    );
    expect(ups[0]).toMatchObject({
      sessionUpdate: "tool_call",
      kind: "edit",
      title: "Edit /workspace/app/a.ts",
      content: [{ type: "diff", path: "/home/me/app/a.ts", oldText: "x", newText: "y" }],
      locations: [{ path: "/home/me/app/a.ts" }],
    });
    expect(ups[1]).toMatchObject({ sessionUpdate: "tool_call_update", status: "completed" });
    expect("content" in ups[1]! && ups[1].content).toBeFalsy();
    expect(ups[2]).toMatchObject({ kind: "execute", title: "false" });
    expect(ups[3]).toMatchObject({ status: "failed", content: [{ type: "content", content: { type: "text", text: "exit 1" } }] });
    expect(text(ups[4]!)).toContain("the model is overloaded");
  });

  test("a to-do list is a plan besides its tool call", () => {
    const ups = fold(
      log([
        emit(Events.toolCalled, {
          id: "t1",
          name: "TodoWrite",
          input: {
            todos: [
              { content: "read", status: "completed", activeForm: "reading" },
              { content: "write", status: "in_progress", activeForm: "writing" },
            ],
          },
        }),
      ]),
    );
    expect(ups.map((u) => u.sessionUpdate)).toEqual(["tool_call", "plan"]);
    expect(ups[1]).toMatchObject({
      entries: [
        { content: "read", status: "completed", priority: "medium" },
        { content: "write", status: "in_progress", priority: "medium" },
      ],
    });
  });

  test("events an editor has nothing to show for give nothing", () => {
    expect(
      fold(
        log([
          emit(Events.agentState, { state: "busy" }),
          emit(Events.usageReported, { available: true, input: 1, output: 2, cached: null }),
          emit(Events.attentionRequired, { reason: "done" }),
        ]),
      ),
    ).toEqual([]);
  });
});

describe("tools", () => {
  test.each([
    ["Bash", "execute"],
    ["shell", "execute"],
    ["Write", "edit"],
    ["MultiEdit", "edit"],
    ["file_change", "edit"],
    ["Read", "read"],
    ["Grep", "search"],
    ["WebFetch", "fetch"],
    ["TodoWrite", "think"],
    ["mcp__hutch__browser_snapshot", "other"],
  ])("%s is %s", (name, kind) => expect(toolKind(name)).toBe(kind as ReturnType<typeof toolKind>));

  test("titles: the command, the file, the pattern, else the name; one line, bounded", () => {
    expect(toolTitle("Bash", { command: "ls -la\nrm x" })).toBe("ls -la");
    expect(toolTitle("shell", { command: ["bash", "-lc", "make"] })).toBe("bash -lc make");
    expect(toolTitle("Read", { file_path: "/w/a.ts" })).toBe("Read /w/a.ts");
    expect(toolTitle("Grep", { pattern: "TODO" })).toBe("Grep TODO");
    expect(toolTitle("Task", {})).toBe("Task");
    expect(toolTitle("Bash", { command: "x".repeat(500) }).length).toBe(200);
  });

  test("diffs: a new file, an edit, several edits; nothing for a tool that edits nothing", () => {
    const id = (p: string) => p;
    expect(toolDiffs("Write", { file_path: "/a", content: "new" }, id)).toEqual([
      { type: "diff", path: "/a", oldText: null, newText: "new" },
    ]);
    expect(toolDiffs("MultiEdit", { file_path: "/a", edits: [{ old_string: "1", new_string: "2" }] }, id)).toEqual([
      { type: "diff", path: "/a", oldText: "1", newText: "2" },
    ]);
    expect(toolDiffs("edit", { path: "/a", oldText: "o", newText: "n" }, id)).toEqual([
      { type: "diff", path: "/a", oldText: "o", newText: "n" },
    ]);
    expect(toolDiffs("Read", { file_path: "/a" }, id)).toEqual([]);
  });

  test("plans from Codex's todo_list", () => {
    expect(
      planOf("todo_list", {
        items: [
          { text: "a", completed: true },
          { text: "b", completed: false },
        ],
      }),
    ).toEqual([
      { content: "a", status: "completed" },
      { content: "b", status: "pending" },
    ]);
    expect(planOf("Bash", { command: "x" })).toBeNull();
  });
});

describe("the agent's edges", () => {
  test("paths in the box's repository are the editor's; others stay the box's", () => {
    const m = pathMapper("/workspace/app/", "/home/me/app");
    expect(m("/workspace/app/src/x.ts")).toBe("/home/me/app/src/x.ts");
    expect(m("/workspace/app")).toBe("/home/me/app");
    expect(m("/workspace/apple/x")).toBeNull();
    expect(m("/etc/passwd")).toBeNull();
    expect(m("/workspace/app/../../etc/passwd")).toBeNull();
    expect(m("/workspace/app/./x")).toBeNull();
    expect(m("/workspace/app//src//x.ts")).toBe("/home/me/app/src/x.ts");
  });

  test("an editor's name becomes an actor name the daemon accepts", () => {
    expect(actorName("Zed")).toBe("acp.zed");
    expect(actorName("JetBrains AI Assistant")).toBe("acp.jetbrains-ai-assistant");
    expect(actorName(undefined)).toBe("acp.editor");
    expect(actorName("__")).toBe("acp.editor");
  });

  test("a prompt's blocks as one text: resources named, embedded text inlined", () => {
    expect(
      promptText([
        { type: "text", text: "fix" },
        { type: "resource_link", uri: "file:///a.ts", name: "a.ts" },
        { type: "resource", resource: { uri: "file:///b.ts", text: "let b" } },
      ]),
    ).toBe("fix\n@file:///a.ts\n@file:///b.ts\n```\nlet b\n```");
  });

  test("a hutch error keeps its next step in the JSON-RPC error", () => {
    const e = requestError(new HutchError("not_found", "no box x", "list boxes: hutch box list"));
    expect(e.code).toBe(-32002);
    expect(e.message).toBe("no box x (next: list boxes: hutch box list)");
    expect(requestError(new HutchError("conflict", "driven by bob", "steal it")).code).toBe(-32603);
  });
});
