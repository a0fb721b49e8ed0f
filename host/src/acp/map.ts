// A hutch session's log as ACP `session/update`s: one pure fold over the
// events, in seq order, so a live turn and a replay (`session/load`) give an
// editor the same updates. The harness has already turned each agent CLI's
// stream into typed events (host/src/harness); this reads them through the
// registry and names what ACP shows: prompts as user chunks, messages as agent
// (or thought) chunks, tool calls with their kind, title, locations and, for
// file edits, diffs, and to-do lists as plans. Every update carries the event's
// seq and actor in `_meta.hutch`, so an editor can tell whose turn it was.
import { Events, planOf, read, toolEdits, toolFiles, toolKind, toolTitle, type SessionEvent } from "@hutch/shared";
import type { PlanEntry, SessionUpdate, ToolCallContent } from "@agentclientprotocol/sdk";

export interface MapOptions {
  /** The session runs its agent headless: its prompts are input.sent; a terminal session's are the agent's own user messages. */
  headless: boolean;
  /** A path in the box as the editor knows it (the offloaded folder's own), or null to leave it as the box's. */
  localPath?: (boxPath: string) => string | null;
}

/** What the fold remembers between events: which messages streamed deltas, and each tool call's name. */
export interface MapState {
  roles: Map<string, "assistant" | "user" | "reasoning">;
  streamed: Set<string>;
  tools: Map<string, string>;
}

export const newMapState = (): MapState => ({ roles: new Map(), streamed: new Set(), tools: new Map() });

/** The edits a tool's input describes, as ACP diffs, each path as the editor knows it. */
export function toolDiffs(name: string, input: unknown, localPath: (p: string) => string): ToolCallContent[] {
  return toolEdits(name, input).map((e) => ({ type: "diff", path: localPath(e.path), oldText: e.oldText, newText: e.newText }));
}

/** A to-do list tool's input as an ACP plan, else null. */
function acpPlan(name: string, input: unknown): PlanEntry[] | null {
  return planOf(name, input)?.map((p) => ({ ...p, priority: "medium" })) ?? null;
}

const text = (t: string) => ({ type: "text" as const, text: t });

/**
 * The updates one event gives, in order (most give none). `state` is updated
 * in place; fold a session's events through one state, in seq order.
 */
export function updatesOf(e: SessionEvent, state: MapState, o: MapOptions): SessionUpdate[] {
  const meta = { hutch: { seq: e.seq, actor: e.actor, at: e.at } };
  const local = (p: string) => o.localPath?.(p) ?? p;
  const out: SessionUpdate[] = [];
  const input = o.headless ? read(e, Events.inputSent) : null;
  const started = read(e, Events.messageStarted);
  const delta = read(e, Events.messageDelta);
  const completed = read(e, Events.messageCompleted);
  const called = read(e, Events.toolCalled);
  const done = read(e, Events.toolCompleted);
  const error = read(e, Events.errorRaised);
  if (input) out.push({ sessionUpdate: "user_message_chunk", content: text(input.text) });
  else if (started) state.roles.set(started.id, started.role);
  else if (delta) {
    state.streamed.add(delta.id);
    out.push(chunk(state.roles.get(delta.id) ?? "assistant", delta.id, delta.text));
  } else if (completed) {
    // A message whose deltas streamed has been shown; one that never streamed is shown whole.
    const seen = state.streamed.delete(completed.id);
    state.roles.delete(completed.id);
    if (!seen && completed.text && !(o.headless && completed.role === "user"))
      out.push(chunk(completed.role, completed.id, completed.text));
  } else if (called) {
    state.tools.set(called.id, called.name);
    const diffs = toolDiffs(called.name, called.input, local);
    out.push({
      sessionUpdate: "tool_call",
      toolCallId: called.id,
      title: toolTitle(called.name, called.input),
      kind: toolKind(called.name),
      status: "in_progress",
      rawInput: called.input,
      ...(diffs.length ? { content: diffs } : {}),
      locations: toolFiles(called.name, called.input).map((f) => ({ ...f, path: local(f.path) })),
    });
    const plan = acpPlan(called.name, called.input);
    if (plan) out.push({ sessionUpdate: "plan", entries: plan });
  } else if (done) {
    out.push({
      sessionUpdate: "tool_call_update",
      toolCallId: done.id,
      status: done.status === "ok" ? "completed" : "failed",
      rawOutput: done.output,
      // An edit keeps its diff as its content; any other tool shows what it printed.
      ...(toolKind(state.tools.get(done.id) ?? "") === "edit" && done.status === "ok"
        ? {}
        : done.output
          ? { content: [{ type: "content" as const, content: text(done.output) }] }
          : {}),
    });
    state.tools.delete(done.id);
  } else if (error) out.push(chunk("assistant", `error-${e.seq}`, `\n[hutch: ${error.message}]\n`));
  return out.map((u) => ({ ...u, _meta: meta }));
}

function chunk(role: "assistant" | "user" | "reasoning", id: string, t: string): SessionUpdate {
  const sessionUpdate = role === "user" ? "user_message_chunk" : role === "reasoning" ? "agent_thought_chunk" : "agent_message_chunk";
  return { sessionUpdate, messageId: id, content: text(t) };
}
