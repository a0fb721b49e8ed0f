// A session's log as a conversation: one pure fold over its events, in seq
// order, so the view built live and the one rebuilt after a window reload
// (a replay from seq 1) are the same. Prompts (a headless agent's input, a
// terminal agent's own user messages) with who sent them, the agent's
// messages (streamed deltas until the message completes), its thinking,
// tool calls with their input, result and the edits they make, to-do lists,
// approvals waiting for a person and how they were decided, annotations,
// errors, usage and the agent's state. Events come from the daemon and the
// agent's words from the box: every event is read through the registry's
// schemas (`read`), and anything that does not fit is left out.
import { Events, read, type Actor } from "@hutch/shared/events";
import { planOf, toolEdits, toolKind, toolTitle, type PlanStatus, type ToolEdit, type ToolKind } from "@hutch/shared/agent-tools";

export interface Ev {
  seq: number;
  at: string;
  actor: Actor;
  kind: string;
  data: unknown;
}

interface Base {
  /** The seq of the event that opened the item (its key in the view). */
  seq: number;
  at: string;
  actor: Actor;
}

export type Item =
  | (Base & { type: "prompt"; text: string })
  | (Base & { type: "message"; id: string; role: "assistant" | "reasoning"; text: string; done: boolean; truncated: boolean })
  | (Base & {
      type: "tool";
      id: string;
      name: string;
      kind: ToolKind;
      title: string;
      input: unknown;
      edits: ToolEdit[];
      plan: { content: string; status: PlanStatus }[] | null;
      status: "running" | "ok" | "error";
      output: string | null;
      truncated: boolean;
    })
  | (Base & {
      type: "approval";
      id: string;
      summary: string;
      expiresAt: string;
      decision: string | null;
      reason: string | null;
      by: Actor | null;
    })
  | (Base & { type: "note"; text: string; anchor: { path: string; line?: number } | null })
  | (Base & { type: "error"; text: string })
  /** Someone (the actor) stopped the turn; the agent's own error at that end is not shown beside it. */
  | (Base & { type: "stop" })
  | (Base & { type: "turn"; state: "idle" | "needs-input" | "error"; reason: string | null; stoppedBy: Actor | null });

export type AgentState = "busy" | "idle" | "needs-input" | "error" | "unknown";

export interface Conversation {
  items: Item[];
  /** The agent's state as the last agent.state said; "unknown" before any. */
  state: AgentState;
  /** Token counts summed over every usage report. */
  usage: { input: number; output: number; cached: number; reports: number };
  /** Who stopped the running turn, until it has ended. */
  stopping: Actor | null;
  /** The last seq folded (0: none). */
  last: number;
  /** Items by what they are keyed on (a message's or tool call's id, an approval's id). */
  readonly byKey: Map<string, Item>;
  /** Ids of user messages (a terminal agent's prompts as it echoes them), whose deltas are not the agent's words. */
  readonly users: Set<string>;
  /** Whether prompts are input.sent (a headless agent) or the agent's own user messages (a terminal agent). */
  readonly headless: boolean;
}

export const newConversation = (headless: boolean): Conversation => ({
  items: [],
  state: "unknown",
  stopping: null,
  usage: { input: 0, output: 0, cached: 0, reports: 0 },
  last: 0,
  byKey: new Map(),
  users: new Set(),
  headless,
});

const base = (e: Ev): Base => ({ seq: e.seq, at: e.at, actor: e.actor });

type Message = Extract<Item, { type: "message" }>;

/** The message with this id: the one shown, or a new one (empty, still streaming) added at this event. */
function messageOf(c: Conversation, e: Ev, id: string, role: Message["role"]): Message {
  const shown = find(c, `m:${id}`, "message");
  if (shown) return shown;
  const m: Message = { ...base(e), type: "message", id, role, text: "", done: false, truncated: false };
  add(c, `m:${id}`, m);
  return m;
}

/** Adds an item (under its key); true, as the view changed. */
function add(c: Conversation, key: string | null, item: Item): true {
  c.items.push(item);
  if (key) c.byKey.set(key, item);
  return true;
}

function find<T extends Item["type"]>(c: Conversation, key: string, type: T): Extract<Item, { type: T }> | null {
  const it = c.byKey.get(key);
  return it?.type === type ? (it as Extract<Item, { type: T }>) : null;
}

/**
 * Folds one event into the conversation; returns whether anything the view
 * shows changed. Events at or below the last seq folded are ignored (a
 * resubscribe that overlaps).
 */
export function fold(c: Conversation, e: Ev): boolean {
  if (e.seq <= c.last) return false;
  c.last = e.seq;
  // A log brought home from a box (`hutch bring-back --session`) carries the box's events inside: shown as they were.
  const imported = read(e, Events.sessionEventImported);
  if (imported) return apply(c, { seq: e.seq, at: imported.at, actor: imported.actor, kind: imported.kind, data: imported.data });
  return apply(c, e);
}

function apply(c: Conversation, e: Ev): boolean {
  const input = c.headless ? read(e, Events.inputSent) : null;
  if (input) return add(c, null, { ...base(e), type: "prompt", text: input.text });

  const started = read(e, Events.messageStarted);
  if (started) {
    if (started.role === "user") {
      c.users.add(started.id);
      return false;
    }
    messageOf(c, e, started.id, started.role);
    return true;
  }
  const delta = read(e, Events.messageDelta);
  if (delta) {
    if (c.users.has(delta.id)) return false;
    const m = messageOf(c, e, delta.id, "assistant");
    if (m.done) return false;
    m.text += delta.text;
    return true;
  }
  const completed = read(e, Events.messageCompleted);
  if (completed) {
    if (completed.role === "user") {
      // A headless agent's user message repeats the prompt already shown from its input.
      if (c.headless || !completed.text.trim()) return false;
      if (c.byKey.has(`u:${completed.id}`)) return false;
      return add(c, `u:${completed.id}`, { ...base(e), type: "prompt", text: completed.text });
    }
    // A message that never streamed is shown whole; an empty one is nothing to show.
    if (!completed.text && !find(c, `m:${completed.id}`, "message")) return false;
    const m = messageOf(c, e, completed.id, completed.role);
    m.text = completed.text;
    m.done = true;
    m.truncated = completed.truncated === true;
    return true;
  }
  const called = read(e, Events.toolCalled);
  if (called) {
    add(c, `t:${called.id}`, {
      ...base(e),
      type: "tool",
      id: called.id,
      name: called.name,
      kind: toolKind(called.name),
      title: toolTitle(called.name, called.input),
      input: called.input,
      edits: toolEdits(called.name, called.input),
      plan: planOf(called.name, called.input),
      status: "running",
      output: null,
      truncated: false,
    });
    return true;
  }
  const done = read(e, Events.toolCompleted);
  if (done) {
    const t = find(c, `t:${done.id}`, "tool");
    if (!t) return false;
    t.status = done.status;
    t.output = done.output;
    t.truncated = done.truncated === true;
    return true;
  }
  const asked = read(e, Events.approvalRequested);
  if (asked) {
    add(c, `a:${asked.id}`, {
      ...base(e),
      type: "approval",
      id: asked.id,
      summary: asked.summary,
      expiresAt: asked.expiresAt,
      decision: null,
      reason: null,
      by: null,
    });
    return true;
  }
  const decided = read(e, Events.approvalDecided);
  if (decided) {
    const a = find(c, `a:${decided.id}`, "approval");
    if (!a) return false;
    a.decision = decided.decision;
    a.reason = decided.reason ?? null;
    a.by = e.actor;
    return true;
  }
  const note = read(e, Events.annotationAdded);
  if (note) {
    const anchor = note.anchor ? { path: note.anchor.path, ...(note.anchor.line ? { line: note.anchor.line } : {}) } : null;
    return add(c, null, { ...base(e), type: "note", text: note.text, anchor });
  }
  if (read(e, Events.turnInterrupted)) {
    c.stopping = e.actor;
    return add(c, null, { ...base(e), type: "stop" });
  }
  const error = read(e, Events.errorRaised);
  // The agent's error as it is stopped is how it says so: the stop line says it better.
  if (error) return c.stopping ? false : add(c, null, { ...base(e), type: "error", text: error.message });
  const usage = read(e, Events.usageReported);
  if (usage) {
    if (!usage.available) return false;
    c.usage.input += usage.input ?? 0;
    c.usage.output += usage.output ?? 0;
    c.usage.cached += usage.cached ?? 0;
    c.usage.reports++;
    return true;
  }
  const state = read(e, Events.agentState);
  if (state) {
    const was = c.state;
    c.state = state.state;
    // A turn's end is a line in the conversation; busy is only the header's state.
    if (state.state !== "busy" && was === "busy") {
      add(c, null, { ...base(e), type: "turn", state: state.state, reason: state.reason ?? null, stoppedBy: c.stopping });
      c.stopping = null;
    }
    return true;
  }
  return false;
}

/** The approvals still waiting for a person, oldest first. */
export const pending = (c: Conversation): Extract<Item, { type: "approval" }>[] =>
  c.items.filter((i): i is Extract<Item, { type: "approval" }> => i.type === "approval" && i.decision === null);
