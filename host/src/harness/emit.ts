// Builds the harness events in the shapes shared/src/events.ts registers, and
// keeps the bookkeeping every mapper needs: a message is started once, before
// its first text; a tool is called once, before its result; a turn ends once.
import { emit, Events, type EventData } from "@hutch/shared";
import { boundedInput, cut, MAX_TOOL_OUTPUT, num } from "./limits.ts";
import type { MappedEvent } from "./types.ts";

type Role = EventData<"message.started">["role"];
type Exit = { code: number | null; signal: string | null };

export class Emitter {
  private readonly started = new Set<string>();
  private readonly called = new Set<string>();
  private busy = false;
  /** Whether the current turn ended (idle or error), so the process exit need not say it again. */
  private ended = false;

  /** The agent is working (logged once per turn). */
  working(): MappedEvent[] {
    if (this.busy) return [];
    this.busy = true;
    this.ended = false;
    return [emit(Events.agentState, { state: "busy" })];
  }

  delta(id: string, text: string, role: Role = "assistant"): MappedEvent[] {
    if (!text) return [];
    return [...this.start(id, role), emit(Events.messageDelta, { id, text: cut(text).text })];
  }

  message(id: string, text: string, role: Role = "assistant"): MappedEvent[] {
    const c = cut(text);
    return [
      ...this.start(id, role),
      emit(Events.messageCompleted, { id, role, text: c.text, ...(c.truncated ? { truncated: true } : {}) }),
    ];
  }

  toolCalled(id: string, name: string, input: unknown): MappedEvent[] {
    if (this.called.has(id)) return [];
    this.called.add(id);
    return [emit(Events.toolCalled, { id, name, input: boundedInput(input) })];
  }

  /** A result; calls the tool first if the stream never announced the call. */
  toolCompleted(id: string, output: string, ok: boolean, call?: { name: string; input: unknown }): MappedEvent[] {
    const c = cut(output, MAX_TOOL_OUTPUT);
    return [
      ...(call ? this.toolCalled(id, call.name, call.input) : []),
      emit(Events.toolCompleted, { id, output: c.text, status: ok ? "ok" : "error", ...(c.truncated ? { truncated: true } : {}) }),
    ];
  }

  usage(input: unknown, output: unknown, cached: unknown): MappedEvent[] {
    const u = { input: num(input), output: num(output), cached: num(cached) };
    return [emit(Events.usageReported, { available: u.input !== null || u.output !== null || u.cached !== null, ...u })];
  }

  /** The turn is done and the agent waits for the next input. */
  idle(reason = "the agent finished its turn"): MappedEvent[] {
    if (this.ended) return [];
    this.ended = true;
    this.busy = false;
    return [emit(Events.agentState, { state: "idle", reason }), emit(Events.attentionRequired, { reason })];
  }

  error(message: string): MappedEvent[] {
    return [emit(Events.errorRaised, { message: cut(message).text, code: "agent" })];
  }

  /** The turn failed: an error, the agent in error, and attention. */
  failed(message: string, exit?: Exit): MappedEvent[] {
    if (this.ended) return this.error(message);
    this.ended = true;
    this.busy = false;
    const reason = cut(message, 1024).text;
    return [
      ...this.error(message),
      emit(Events.agentState, { state: "error", reason, ...(exit ? { exit } : {}) }),
      emit(Events.attentionRequired, { reason }),
    ];
  }

  /** The process ended: a turn it left open is an error; a clean turn already said idle. */
  exited(exit: Exit): MappedEvent[] {
    const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
    if (this.ended && exit.code === 0) return [];
    if (this.ended) return this.error(`the agent exited with ${how}`);
    if (exit.code === 0) return this.idle("the agent exited");
    return this.failed(`the agent exited with ${how} before finishing its turn`, exit);
  }

  private start(id: string, role: Role): MappedEvent[] {
    if (this.started.has(id)) return [];
    this.started.add(id);
    return [emit(Events.messageStarted, { id, role })];
  }
}
