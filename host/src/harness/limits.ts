// Bounds on what an agent's stream may put into the log. Everything from a
// box is untrusted: text is cut, oversized inputs are summarised, and the cut
// is marked, never silent.
import { emit, EVENT_TEXT_MAX, Events, type EventData } from "@hutch/shared";
import type { MappedEvent } from "./types.ts";

/** Longest tool output kept; the rest is in the box. */
export const MAX_TOOL_OUTPUT = 16_384;
/** Longest stream line read; a longer one is kept as a truncated agent.raw. */
export const MAX_LINE = 4 * 1024 * 1024;
/** Largest tool input kept as JSON; a bigger one is replaced by a preview. */
const MAX_INPUT_JSON = 32_768;

export function cut(text: string, max = EVENT_TEXT_MAX): { text: string; truncated?: true } {
  return text.length <= max ? { text } : { text: text.slice(0, max), truncated: true };
}

export function boundedInput(input: unknown): unknown {
  const json = JSON.stringify(input ?? null);
  if (json.length <= MAX_INPUT_JSON) return input ?? null;
  return { truncated: true, preview: json.slice(0, 4096) };
}

export const raw = (line: string, reason: EventData<"agent.raw">["reason"]): MappedEvent => {
  const c = cut(line);
  return emit(Events.agentRaw, { line: c.text, reason, ...(c.truncated ? { truncated: true } : {}) });
};

export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
export const num = (v: unknown): number | null => (typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : null);
export const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/** A Mapper's line(): each line parsed as a JSON object and handed to `map`; anything else comes back as agent.raw. */
export function jsonLines(map: (rec: Record<string, unknown>, text: string) => MappedEvent[]): (text: string) => MappedEvent[] {
  return (text) => {
    const r = parseRecord(text);
    return "bad" in r ? [r.bad] : map(r.rec, text);
  };
}

/** Parses one stream line as a JSON object, or gives the agent.raw that keeps it. */
function parseRecord(line: string): { rec: Record<string, unknown> } | { bad: MappedEvent } {
  try {
    const v = obj(JSON.parse(line));
    return v ? { rec: v } : { bad: raw(line, "unparsed") };
  } catch {
    return { bad: raw(line, "unparsed") };
  }
}
