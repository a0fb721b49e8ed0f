// A session's conversation for people: who said what, which tools ran and
// what they returned, usage, and how each turn ended. Deltas are folded into
// their message; a message that never completed is shown with what arrived.
// What the agent, its tools and other users wrote goes through terminalText:
// a message holding ESC ] 52 must not write the reader's clipboard.
import { isEvent, type EventKind, type SessionEvent } from "@hutch/shared";
import { terminalJson, terminalText } from "@hutch/shared/text";

/** The kinds that make up a conversation (the rest is terminal bytes and bookkeeping). */
export const CONVERSATION_KINDS = new Set<string>([
  "input.sent",
  "message.started",
  "message.delta",
  "message.completed",
  "tool.called",
  "tool.completed",
  "usage.reported",
  "agent.state",
  "attention.required",
  "error.raised",
  "agent.raw",
  "exec.exited",
  "session.closed",
] satisfies EventKind[]);

const one = (s: string) => terminalText(s, { oneLine: true });
const indent = (text: string, prefix = "  ") =>
  text
    .split("\n")
    .map((l) => prefix + l)
    .join("\n");
const short = (s: string, max = 2000) => (s.length > max ? `${s.slice(0, max)}… (${s.length - max} more characters)` : s);

/** The conversation as text, one block per entry, in log order. */
export function renderTranscript(events: SessionEvent[]): string {
  const out: string[] = [];
  const partial = new Map<string, string>();
  const completed = new Set<string>();
  for (const e of events) out.push(...renderEntry(e, partial, completed));
  for (const [id, text] of partial) if (!completed.has(id)) out.push(`assistant (incomplete, ${one(id)}):\n${indent(terminalText(text))}`);
  return out.join("\n") + (out.length ? "\n" : "");
}

/** One event's lines; `partial` folds deltas until their message completes. An event that does not fit its kind is said to be so. */
export function renderEntry(e: SessionEvent, partial = new Map<string, string>(), completed = new Set<string>()): string[] {
  if (!isEvent(e))
    return CONVERSATION_KINDS.has(e.kind) ? [`?? (${one(e.kind)} that does not fit its schema) ${short(terminalJson(e.data), 500)}`] : [];
  switch (e.kind) {
    case "input.sent":
      return [`> ${one(e.actor.id)}: ${terminalText(e.data.text.trimEnd())}`];
    case "message.delta":
      partial.set(e.data.id, (partial.get(e.data.id) ?? "") + e.data.text);
      return [];
    case "message.completed": {
      const d = e.data;
      completed.add(d.id);
      partial.delete(d.id);
      return [`${d.role === "reasoning" ? "thinking" : d.role}:${d.truncated ? " (cut)" : ""}\n${indent(terminalText(d.text))}`];
    }
    case "tool.called":
      return [`tool ${one(e.data.name)} [${one(e.data.id)}]\n${indent(short(terminalJson(e.data.input)))}`];
    case "tool.completed": {
      const d = e.data;
      return [`  → ${one(d.status)}${d.truncated ? " (cut)" : ""}${d.output ? `\n${indent(terminalText(short(d.output)), "    ")}` : ""}`];
    }
    case "usage.reported": {
      const d = e.data;
      return [d.available ? `usage: input ${d.input ?? "?"}, output ${d.output ?? "?"}, cached ${d.cached ?? "?"}` : "usage: not reported"];
    }
    case "agent.state":
      return e.data.state === "busy" ? [] : [`-- ${one(e.data.state)}${e.data.reason ? `: ${terminalText(e.data.reason)}` : ""}`];
    case "error.raised":
      return [`!! ${terminalText(e.data.message)}`];
    case "agent.raw":
      return e.data.reason === "unknown" ? [] : [`?? (${one(e.data.reason)}) ${terminalText(short(e.data.line, 500))}`];
    case "exec.exited":
      return [`-- exited ${e.data.signal ? `by signal ${one(e.data.signal)}` : `with code ${e.data.code}`}`];
    case "session.closed":
      return [`-- session closed${e.data.reason ? `: ${terminalText(e.data.reason)}` : ""}`];
    default:
      return [];
  }
}
