// Claude Code (@anthropic-ai/claude-code). Headless: `-p --output-format
// stream-json --verbose --include-partial-messages` prints one JSON record
// per line: system/init, stream_event (raw Messages API events, for deltas),
// assistant and user messages (tool calls and results), and a final result
// with the turn's usage. Flags checked against `claude --help` of the pinned version.
import { Emitter } from "./emit.ts";
import { proxyEnv } from "./env.ts";
import { obj, parseRecord, raw, str } from "./limits.ts";
import type { Harness, MappedEvent, Mapper } from "./types.ts";

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return JSON.stringify(content ?? "");
  return content.map((b) => (obj(b)?.type === "text" ? (str(obj(b)!.text) ?? "") : JSON.stringify(b))).join("\n");
}

export function claudeMapper(): Mapper {
  const e = new Emitter();
  /** The API message id the current stream_event deltas belong to. */
  let streaming: string | null = null;

  const streamEvent = (ev: Record<string, unknown>): MappedEvent[] | null => {
    if (ev.type === "message_start") {
      streaming = str(obj(ev.message)?.id) ?? null;
      return [];
    }
    if (ev.type === "content_block_delta") {
      const d = obj(ev.delta);
      if (d?.type === "text_delta" && streaming) return e.delta(streaming, str(d.text) ?? "");
      if (d?.type === "thinking_delta" && streaming) return e.delta(`${streaming}:thinking`, str(d.thinking) ?? "", "reasoning");
      return [];
    }
    // Block starts and stops, input_json deltas, message_delta/stop: the whole assistant record that follows says it all.
    return ["content_block_start", "content_block_stop", "message_delta", "message_stop", "ping"].includes(str(ev.type) ?? "") ? [] : null;
  };

  return {
    line(text) {
      const r = parseRecord(text);
      if ("bad" in r) return [r.bad];
      const rec = r.rec;
      switch (rec.type) {
        case "system":
          // init starts the run; status ("requesting") says it is working on the next model call.
          if (rec.subtype === "init" || rec.subtype === "status") return e.working();
          if (rec.subtype === "api_retry") {
            return e.error(`claude: the model API failed (${String(rec.error_status ?? rec.error ?? "no status")}); retry ${String(rec.attempt)} of ${String(rec.max_retries)} in ${Math.round(Number(rec.retry_delay_ms) / 1000)} s`);
          }
          return [raw(text, "unknown")];
        case "stream_event": {
          const ev = obj(rec.event);
          const out = ev ? streamEvent(ev) : null;
          return out ?? [raw(text, "unknown")];
        }
        case "assistant": {
          const msg = obj(rec.message);
          const id = str(msg?.id);
          if (!msg || !id || !Array.isArray(msg.content)) return [raw(text, "invalid")];
          const out: MappedEvent[] = [...e.working()];
          for (const b of msg.content.map(obj)) {
            if (b?.type === "text") out.push(...e.message(id, str(b.text) ?? ""));
            else if (b?.type === "thinking") out.push(...e.message(`${id}:thinking`, str(b.thinking) ?? "", "reasoning"));
            else if (b?.type === "tool_use") out.push(...e.toolCalled(str(b.id) ?? "", str(b.name) ?? "", b.input));
            else out.push(raw(JSON.stringify(b), "unknown"));
          }
          return out;
        }
        case "user": {
          const content = obj(rec.message)?.content;
          if (!Array.isArray(content)) return [raw(text, "invalid")];
          const out: MappedEvent[] = [];
          for (const b of content.map(obj)) {
            if (b?.type === "tool_result") out.push(...e.toolCompleted(str(b.tool_use_id) ?? "", textOf(b.content), b.is_error !== true));
            // The prompt itself is logged by hutch as input.sent, attributed to whoever sent it.
            else if (b?.type !== "text") out.push(raw(JSON.stringify(b), "unknown"));
          }
          return out;
        }
        case "result": {
          const u = obj(rec.usage);
          const out = u ? e.usage(u.input_tokens, u.output_tokens, u.cache_read_input_tokens) : e.usage(null, null, null);
          if (rec.is_error === true || (typeof rec.subtype === "string" && rec.subtype !== "success")) {
            return [...out, ...e.failed(`claude: ${str(rec.result) ?? str(rec.subtype) ?? "the turn failed"}`)];
          }
          return [...out, ...e.idle()];
        }
        default:
          return [raw(text, "unknown")];
      }
    },
    end: (exit) => e.exited(exit),
  };
}

export const claude: Harness = {
  name: "claude",
  npm: { name: "@anthropic-ai/claude-code", version: "2.1.332", bin: "claude" },
  bindings: ["anthropic"],
  egress: [],
  env: (ctx) => ({
    ...proxyEnv(ctx),
    ANTHROPIC_BASE_URL: ctx.endpoint("anthropic"),
    ANTHROPIC_API_KEY: ctx.stub("anthropic"),
    // Without this it calls the vendor directly whatever ANTHROPIC_BASE_URL says (FIELD-NOTES).
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    // The box is the sandbox; as root (VMs) --dangerously-skip-permissions is refused without it.
    IS_SANDBOX: "1",
  }),
  // Skips first-run onboarding and the folder-trust prompt in the TUI, which the box makes moot.
  files: (ctx) => ({
    ".claude.json": JSON.stringify({ hasCompletedOnboarding: true, theme: "dark", projects: { [ctx.workdir]: { hasTrustDialogAccepted: true, hasCompletedProjectOnboarding: true } } }),
  }),
  headless: (prompt, ctx) => [
    "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages", "--dangerously-skip-permissions",
    ...(ctx.model ? ["--model", ctx.model] : []),
    "--", prompt,
  ],
  interactive: (ctx) => ["--dangerously-skip-permissions", ...(ctx.model ? ["--model", ctx.model] : [])],
  mapper: claudeMapper,
  stop: { signal: "INT", graceMs: 5000 },
};
