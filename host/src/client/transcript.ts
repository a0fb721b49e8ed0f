// A session's conversation for people: who said what, which tools ran and
// what they returned, usage, and how each turn ended. Deltas are folded into
// their message; a message that never completed is shown with what arrived.
import type { SessionEvent } from "@hutch/shared";

/** The kinds that make up a conversation (the rest is terminal bytes and bookkeeping). */
export const CONVERSATION_KINDS = new Set([
  "input.sent", "message.started", "message.delta", "message.completed", "tool.called", "tool.completed",
  "usage.reported", "agent.state", "attention.required", "error.raised", "agent.raw", "exec.exited", "session.closed",
]);

type Data = Record<string, unknown>;
const indent = (text: string, prefix = "  ") => text.split("\n").map((l) => prefix + l).join("\n");
const short = (s: string, max = 2000) => (s.length > max ? `${s.slice(0, max)}… (${s.length - max} more characters)` : s);

/** The conversation as text, one block per entry, in log order. */
export function renderTranscript(events: SessionEvent[]): string {
  const out: string[] = [];
  const partial = new Map<string, string>();
  const completed = new Set<string>();
  for (const e of events) out.push(...renderEntry(e, partial, completed));
  for (const [id, text] of partial) if (!completed.has(id)) out.push(`assistant (incomplete, ${id}):\n${indent(text)}`);
  return out.join("\n") + (out.length ? "\n" : "");
}

/** One event's lines; `partial` folds deltas until their message completes. */
export function renderEntry(e: SessionEvent, partial = new Map<string, string>(), completed = new Set<string>()): string[] {
  const d = e.data as Data;
  switch (e.kind) {
    case "input.sent":
      return [`> ${e.actor.id}: ${String(d.text).trimEnd()}`];
    case "message.delta":
      partial.set(String(d.id), (partial.get(String(d.id)) ?? "") + String(d.text));
      return [];
    case "message.completed":
      completed.add(String(d.id));
      partial.delete(String(d.id));
      return [`${d.role === "reasoning" ? "thinking" : String(d.role)}:${d.truncated ? " (cut)" : ""}\n${indent(String(d.text))}`];
    case "tool.called":
      return [`tool ${String(d.name)} [${String(d.id)}]\n${indent(short(JSON.stringify(d.input)))}`];
    case "tool.completed":
      return [`  → ${d.status === "ok" ? "ok" : "error"}${d.truncated ? " (cut)" : ""}${String(d.output) ? `\n${indent(short(String(d.output)), "    ")}` : ""}`];
    case "usage.reported":
      return [d.available ? `usage: input ${d.input ?? "?"}, output ${d.output ?? "?"}, cached ${d.cached ?? "?"}` : "usage: not reported"];
    case "agent.state":
      return d.state === "busy" ? [] : [`-- ${String(d.state)}${d.reason ? `: ${String(d.reason)}` : ""}`];
    case "error.raised":
      return [`!! ${String(d.message)}`];
    case "agent.raw":
      return d.reason === "unknown" ? [] : [`?? (${String(d.reason)}) ${short(String(d.line), 500)}`];
    case "exec.exited":
      return [`-- exited ${d.signal ? `by signal ${String(d.signal)}` : `with code ${String(d.code)}`}`];
    case "session.closed":
      return [`-- session closed${d.reason ? `: ${String(d.reason)}` : ""}`];
    default:
      return [];
  }
}
