// Builds the harness events in the shapes shared/src/events.ts registers, and
// keeps the bookkeeping every mapper needs: a message is started once, before
// its first text; a tool is called once, before its result; a turn ends once.
import { boundedInput, cut, MAX_TOOL_OUTPUT, num } from "./limits.ts";
import type { MappedEvent } from "./types.ts";

type Role = "assistant" | "user" | "reasoning";
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
    return [{ kind: "agent.state", data: { state: "busy" } }];
  }

  delta(id: string, text: string, role: Role = "assistant"): MappedEvent[] {
    if (!text) return [];
    return [...this.start(id, role), { kind: "message.delta", data: { id, text: cut(text).text } }];
  }

  message(id: string, text: string, role: Role = "assistant"): MappedEvent[] {
    const c = cut(text);
    return [...this.start(id, role), { kind: "message.completed", data: { id, role, text: c.text, ...(c.truncated ? { truncated: true } : {}) } }];
  }

  toolCalled(id: string, name: string, input: unknown): MappedEvent[] {
    if (this.called.has(id)) return [];
    this.called.add(id);
    return [{ kind: "tool.called", data: { id, name, input: boundedInput(input) } }];
  }

  /** A result; calls the tool first if the stream never announced the call. */
  toolCompleted(id: string, output: string, ok: boolean, call?: { name: string; input: unknown }): MappedEvent[] {
    const c = cut(output, MAX_TOOL_OUTPUT);
    return [
      ...(call ? this.toolCalled(id, call.name, call.input) : []),
      { kind: "tool.completed", data: { id, output: c.text, status: ok ? "ok" : "error", ...(c.truncated ? { truncated: true } : {}) } },
    ];
  }

  usage(input: unknown, output: unknown, cached: unknown): MappedEvent[] {
    const u = { input: num(input), output: num(output), cached: num(cached) };
    return [{ kind: "usage.reported", data: { available: u.input !== null || u.output !== null || u.cached !== null, ...u } }];
  }

  /** The turn is done and the agent waits for the next input. */
  idle(reason = "the agent finished its turn"): MappedEvent[] {
    if (this.ended) return [];
    this.ended = true;
    this.busy = false;
    return [
      { kind: "agent.state", data: { state: "idle", reason } },
      { kind: "attention.required", data: { reason } },
    ];
  }

  error(message: string): MappedEvent[] {
    return [{ kind: "error.raised", data: { message: cut(message).text, code: "agent" } }];
  }

  /** The turn failed: an error, the agent in error, and attention. */
  failed(message: string, exit?: Exit): MappedEvent[] {
    if (this.ended) return this.error(message);
    this.ended = true;
    this.busy = false;
    const reason = cut(message, 1024).text;
    return [
      ...this.error(message),
      { kind: "agent.state", data: { state: "error", reason, ...(exit ? { exit } : {}) } },
      { kind: "attention.required", data: { reason } },
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
    return [{ kind: "message.started", data: { id, role } }];
  }
}
