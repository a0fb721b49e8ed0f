// A hutch session's log as ACP `session/update`s: one pure fold over the
// events, in seq order, so a live turn and a replay (`session/load`) give an
// editor the same updates. The harness has already turned each agent CLI's
// stream into typed events (host/src/harness); this reads them through the
// registry and names what ACP shows: prompts as user chunks, messages as agent
// (or thought) chunks, tool calls with their kind, title, locations and, for
// file edits, diffs, and to-do lists as plans. Every update carries the event's
// seq and actor in `_meta.hutch`, so an editor can tell whose turn it was.
import { Events, read, type SessionEvent } from "@hutch/shared";
import type { PlanEntry, SessionUpdate, ToolCallContent, ToolCallLocation, ToolKind } from "@agentclientprotocol/sdk";

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

/** Tool names as the agent CLIs call them, by what they do. */
const KINDS: [RegExp, ToolKind][] = [
  [/^(bash|shell|shell_command|exec_command|command_execution|local_shell)$/i, "execute"],
  [/^(write|edit|multiedit|notebookedit|file_change|apply_patch|patch)$/i, "edit"],
  [/^(read|view|cat|read_file)$/i, "read"],
  [/^(grep|glob|find|ls|list|search|toolsearch|web_search|websearch)$/i, "search"],
  [/^(webfetch|fetch)$/i, "fetch"],
  [/^(todowrite|todo_list|todoread|task|exitplanmode)$/i, "think"],
  [/^(delete|rm)$/i, "delete"],
  [/^(move|mv|rename)$/i, "move"],
];

export function toolKind(name: string): ToolKind {
  for (const [re, kind] of KINDS) if (re.test(name)) return kind;
  return "other";
}

const obj = (v: unknown): Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The file a tool's input names, whichever key the agent uses. */
function fileOf(input: Record<string, unknown>): string | undefined {
  return str(input.file_path) ?? str(input.path) ?? str(input.filePath) ?? str(input.notebook_path);
}

/** One line saying what the tool does: the command it runs, the file it touches, or its name. */
export function toolTitle(name: string, input: unknown): string {
  const i = obj(input);
  const command = Array.isArray(i.command) ? i.command.map(String).join(" ") : (str(i.command) ?? str(i.cmd));
  const file = fileOf(i);
  const title = command
    ? `${command}`
    : file
      ? `${name} ${file}`
      : str(i.pattern)
        ? `${name} ${str(i.pattern)}`
        : str(i.url)
          ? `${name} ${str(i.url)}`
          : (str(i.description) ?? name);
  const line = title.split("\n")[0]!;
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

/** The edits a tool's input describes, as ACP diffs (Claude Code's Write, Edit and MultiEdit; opencode's and pi's write and edit). */
export function toolDiffs(name: string, input: unknown, localPath: (p: string) => string): ToolCallContent[] {
  const i = obj(input);
  const file = fileOf(i);
  if (!file || toolKind(name) !== "edit") return [];
  const path = localPath(file);
  if (typeof i.content === "string") return [{ type: "diff", path, oldText: null, newText: i.content }];
  const oldText = str(i.old_string) ?? str(i.oldString) ?? str(i.oldText);
  const newText = str(i.new_string) ?? str(i.newString) ?? str(i.newText);
  if (newText !== undefined) return [{ type: "diff", path, oldText: oldText ?? null, newText }];
  if (Array.isArray(i.edits))
    return i.edits.flatMap((e) => {
      const d = obj(e);
      const n = str(d.new_string) ?? str(d.newText);
      return n === undefined ? [] : [{ type: "diff" as const, path, oldText: str(d.old_string) ?? str(d.oldText) ?? null, newText: n }];
    });
  return [];
}

/** The files a tool's input names, for an editor to follow along. */
function toolLocations(name: string, input: unknown, localPath: (p: string) => string): ToolCallLocation[] {
  const i = obj(input);
  const file = fileOf(i);
  if (file) return [{ path: localPath(file), ...(typeof i.offset === "number" && i.offset > 0 ? { line: i.offset } : {}) }];
  if (name === "file_change" && Array.isArray(i.changes))
    return i.changes.flatMap((c) => (str(obj(c).path) ? [{ path: localPath(str(obj(c).path)!) }] : []));
  return [];
}

const PLAN_STATUS: Record<string, PlanEntry["status"]> = { pending: "pending", in_progress: "in_progress", completed: "completed" };

/** A to-do list tool's input as a plan (Claude Code's TodoWrite, Codex's todo_list), else null. */
export function planOf(name: string, input: unknown): PlanEntry[] | null {
  const i = obj(input);
  if (/^todowrite$/i.test(name) && Array.isArray(i.todos))
    return i.todos.map((t) => {
      const d = obj(t);
      return { content: str(d.content) ?? "", priority: "medium", status: PLAN_STATUS[str(d.status) ?? ""] ?? "pending" };
    });
  if (name === "todo_list" && Array.isArray(i.items))
    return i.items.map((t) => {
      const d = obj(t);
      return { content: str(d.text) ?? "", priority: "medium", status: d.completed === true ? "completed" : "pending" };
    });
  return null;
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
      locations: toolLocations(called.name, called.input, local),
    });
    const plan = planOf(called.name, called.input);
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
