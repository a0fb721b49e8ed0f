// pi (@mariozechner/pi-coding-agent). Headless: `pi --mode json -p` prints
// its session events as JSON lines: session, agent_start/end, turn_start/end,
// message_start/update/end (with token deltas and per-message usage) and
// tool_execution_start/update/end. It reaches the model through a provider
// declared in ~/.pi/agent/models.json (OpenAI Chat Completions at the broker).
// Flags checked against `pi --help` and docs/json.md of the pinned version.
import { AGENT_BINDINGS } from "@hutch/shared/base";
import { Emitter } from "./emit.ts";
import { jsonLines, obj, raw, str } from "./limits.ts";
import type { AgentContext, Harness, MappedEvent, Mapper } from "./types.ts";

const texts = (content: unknown, type: string, field: string) =>
  Array.isArray(content)
    ? content
        .map(obj)
        .filter((b) => b?.type === type)
        .map((b) => str(b![field]) ?? "")
        .join("")
    : "";

export function piMapper(): Mapper {
  const e = new Emitter();
  let n = 0;
  /** pi's messages carry no id: number the assistant messages of this run. */
  let current = "";
  /** The error the last assistant message ended with, if it did. */
  let lastError: string | null = null;
  return {
    line: jsonLines((rec, text) => {
      const msg = obj(rec.message);
      switch (rec.type) {
        case "session":
        case "agent_start":
          return e.working();
        case "turn_start":
        case "turn_end":
        case "tool_execution_update":
          return [];
        case "message_start":
          if (msg?.role === "assistant") current = `pi-msg-${++n}`;
          return [];
        case "message_update": {
          const ev = obj(rec.assistantMessageEvent);
          if (ev?.type === "text_delta") return e.delta(current, str(ev.delta) ?? "");
          if (ev?.type === "thinking_delta") return e.delta(`${current}:thinking`, str(ev.delta) ?? "", "reasoning");
          return [];
        }
        case "message_end": {
          // User prompts are logged by hutch as input.sent; tool results come from tool_execution_end.
          if (msg?.role !== "assistant") return [];
          const out: MappedEvent[] = [];
          const thinking = texts(msg.content, "thinking", "thinking");
          if (thinking) out.push(...e.message(`${current}:thinking`, thinking, "reasoning"));
          const body = texts(msg.content, "text", "text");
          if (body) out.push(...e.message(current, body));
          const u = obj(msg.usage);
          out.push(...(u ? e.usage(u.input, u.output, u.cacheRead) : e.usage(null, null, null)));
          if (msg.stopReason === "error" || msg.stopReason === "aborted") {
            lastError = `pi: ${str(msg.errorMessage) ?? String(msg.stopReason)}`;
            out.push(...e.error(lastError));
          } else lastError = null;
          return out;
        }
        case "tool_execution_start":
          return e.toolCalled(str(rec.toolCallId) ?? "", str(rec.toolName) ?? "", rec.args);
        case "tool_execution_end": {
          const result = obj(rec.result);
          const output = result ? texts(result.content, "text", "text") : JSON.stringify(rec.result ?? "");
          return e.toolCompleted(str(rec.toolCallId) ?? "", output, rec.isError !== true, {
            name: str(rec.toolName) ?? "",
            input: rec.args,
          });
        }
        case "auto_retry_start":
          return e.error(
            `pi: the model call failed (${str(rec.errorMessage) ?? "error"}); retry ${String(rec.attempt)} of ${String(rec.maxAttempts)}`,
          );
        case "auto_retry_end":
          return rec.success === true ? [] : e.error(`pi: gave up retrying: ${str(rec.finalError) ?? "error"}`);
        // A run whose last model call failed ends in error, not idle.
        case "agent_end":
          return lastError ? e.failed(lastError) : e.idle();
        default:
          return [raw(text, "unknown")];
      }
    }),
    end: (exit) => e.exited(exit),
  };
}

const model = (ctx: AgentContext) => ctx.model ?? "gpt-4.1";

export const pi: Harness = {
  name: "pi",
  // Node from npm, not the box's: Debian 12 (VM images) has 18, and pi needs 20.6 or later.
  npm: {
    name: "@mariozechner/pi-coding-agent",
    version: "0.73.1",
    bin: "pi",
    runtime: { name: `node-linux-${process.arch === "arm64" ? "arm64" : "x64"}`, version: "22.23.5", bin: "bin/node" },
  },
  bindings: [...AGENT_BINDINGS.pi],
  egress: [],
  env: (ctx) => ({ OPENAI_API_KEY: ctx.stub("openai"), PI_OFFLINE: "1", PI_TELEMETRY: "0" }),
  files: (ctx) => ({
    ".pi/agent/models.json": JSON.stringify({
      providers: {
        hutch: {
          baseUrl: `${ctx.endpoint("openai")}/v1`,
          api: "openai-completions",
          // The name of the variable holding the (stub) key, resolved by pi.
          apiKey: "OPENAI_API_KEY",
          compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
          models: [{ id: model(ctx) }],
        },
      },
    }),
  }),
  headless: (prompt, ctx, resume) => [
    "--mode",
    "json",
    "-p",
    "--provider",
    "hutch",
    "--model",
    model(ctx),
    ...(typeof resume === "string" ? ["--session", resume] : resume ? ["--continue"] : []),
    prompt,
  ],
  interactive: (ctx) => ["--provider", "hutch", "--model", model(ctx)],
  mapper: piMapper,
  stop: { signal: "INT", graceMs: 5000 },
};
