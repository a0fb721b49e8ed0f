// opencode (opencode-ai). Headless: `opencode run --format json` prints one
// JSON record per part as it completes: step_start, text, reasoning,
// tool_use (with its final state: input, output or error), step_finish (with
// tokens and why the step ended), error. Flags checked against
// `opencode run --help` of the pinned version.
import { AGENT_BINDINGS } from "@hutch/shared/base";
import { Emitter } from "./emit.ts";
import { jsonLines, obj, raw, str } from "./limits.ts";
import type { AgentContext, Harness, Mapper } from "./types.ts";

export function opencodeMapper(): Mapper {
  const e = new Emitter();
  return {
    line: jsonLines((rec, text) => {
      const part = obj(rec.part);
      switch (rec.type) {
        case "step_start":
          return e.working();
        case "text":
        case "reasoning": {
          const id = str(part?.id);
          if (!id) return [raw(text, "invalid")];
          const role = rec.type === "text" ? "assistant" : "reasoning";
          return [...e.delta(id, str(part?.text) ?? "", role), ...e.message(id, str(part?.text) ?? "", role)];
        }
        case "tool_use": {
          const id = str(part?.callID);
          const state = obj(part?.state);
          if (!id || !state) return [raw(text, "invalid")];
          const call = { name: str(part?.tool) ?? "tool", input: state.input };
          if (state.status === "completed") return e.toolCompleted(id, str(state.output) ?? "", true, call);
          if (state.status === "error") return e.toolCompleted(id, str(state.error) ?? "error", false, call);
          return e.toolCalled(id, call.name, call.input);
        }
        case "step_finish": {
          const t = obj(part?.tokens);
          const usage = t ? e.usage(t.input, t.output, obj(t.cache)?.read) : e.usage(null, null, null);
          return part?.reason === "tool-calls" ? usage : [...usage, ...e.idle()];
        }
        case "error": {
          const err = obj(rec.error);
          return e.failed(`opencode: ${str(obj(err?.data)?.message) ?? str(err?.name) ?? "error"}`);
        }
        default:
          return [raw(text, "unknown")];
      }
    }),
    end: (exit) => e.exited(exit),
  };
}

const model = (ctx: AgentContext) =>
  ctx.model ? (ctx.model.includes("/") ? ctx.model : `anthropic/${ctx.model}`) : "anthropic/claude-sonnet-4-5";

export const opencode: Harness = {
  name: "opencode",
  npm: { name: "opencode-ai", version: "1.18.33", bin: "opencode" },
  bindings: [...AGENT_BINDINGS.opencode],
  egress: [],
  env: (ctx) => ({
    ANTHROPIC_API_KEY: ctx.stub("anthropic"),
    OPENCODE_CONFIG_CONTENT: JSON.stringify({
      autoupdate: false,
      share: "disabled",
      model: model(ctx),
      provider: { anthropic: { options: { baseURL: `${ctx.endpoint("anthropic")}/v1` } } },
      // The box's MCP server; the token is in this variable only, which no log keeps.
      ...(ctx.mcp
        ? {
            mcp: {
              [ctx.mcp.name]: { type: "remote", url: ctx.mcp.url, headers: { Authorization: `Bearer ${ctx.mcp.token}` }, enabled: true },
            },
          }
        : {}),
    }),
    // A box reaches no registry or vendor but its model: without these opencode waits on
    // npm and downloads at start-up (measured here: 35 s → 9 s per run behind a closed proxy).
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    OPENCODE_DISABLE_EXTERNAL_SKILLS: "1",
    OPENCODE_DISABLE_CLAUDE_CODE: "1",
  }),
  files: () => ({}),
  headless: (prompt, ctx, resume) => [
    "run",
    "--format",
    "json",
    "--auto",
    "--model",
    model(ctx),
    ...(typeof resume === "string" ? ["--session", resume] : resume ? ["--continue"] : []),
    "--",
    prompt,
  ],
  interactive: (ctx) => ["--model", model(ctx)],
  mapper: opencodeMapper,
  stop: { signal: "INT", graceMs: 5000 },
};
