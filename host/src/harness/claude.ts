// Claude Code (@anthropic-ai/claude-code). Headless: `-p --output-format
// stream-json --verbose --include-partial-messages` prints one JSON record
// per line: system/init, stream_event (raw Messages API events, for deltas),
// assistant and user messages (tool calls and results), and a final result
// with the turn's usage. Flags checked against `claude --help` of the pinned version.
import { AGENT_BINDINGS } from "@hutch/shared/base";
import { MCP_APPROVAL_TOOL } from "@hutch/shared";
import { Emitter } from "./emit.ts";
import { jsonLines, obj, raw, str } from "./limits.ts";
import type { AgentContext, Harness, MappedEvent, Mapper, Resume } from "./types.ts";

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return JSON.stringify(content ?? "");
  return content.map((b) => (obj(b)?.type === "text" ? (str(obj(b)!.text) ?? "") : JSON.stringify(b))).join("\n");
}

/** The user message Claude Code adds when a turn is stopped (SIGINT, or an interrupt control request). */
const INTERRUPTED = "[Request interrupted by user]";

/** `e` is shared when the transcript mapper wraps this one, so a turn's state is kept once. */
export function claudeMapper(e = new Emitter()): Mapper {
  /** The API message id the current stream_event deltas belong to. */
  let streaming: string | null = null;
  /** Claude Code said the turn was interrupted (the user's stop): its failed result is that stop. */
  let interrupted = false;

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
    line: jsonLines((rec, text) => {
      switch (rec.type) {
        case "system":
          // init starts the run; status ("requesting") says it is working on the next model call.
          if (rec.subtype === "init" || rec.subtype === "status") return e.working();
          if (rec.subtype === "api_retry") {
            return e.error(
              `claude: the model API failed (${String(rec.error_status ?? rec.error ?? "no status")}); retry ${String(rec.attempt)} of ${String(rec.max_retries)} in ${Math.round(Number(rec.retry_delay_ms) / 1000)} s`,
            );
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
            else if (b?.type === "text") interrupted ||= b.text === INTERRUPTED;
            else out.push(raw(JSON.stringify(b), "unknown"));
          }
          return out;
        }
        case "result": {
          const u = obj(rec.usage);
          const out = u ? e.usage(u.input_tokens, u.output_tokens, u.cache_read_input_tokens) : e.usage(null, null, null);
          const failed = rec.is_error === true || (typeof rec.subtype === "string" && rec.subtype !== "success");
          // Stopped on request (a warm agent's interrupt): the turn ends as a stopped per-prompt run's does (an error, no usage).
          if (failed && interrupted) return e.failed("claude: the turn was interrupted");
          if (failed) {
            return [...out, ...e.failed(`claude: ${str(rec.result) ?? str(rec.subtype) ?? "the turn failed"}`)];
          }
          return [...out, ...e.idle()];
        }
        default:
          return [raw(text, "unknown")];
      }
    }),
    end: (exit) => e.exited(exit),
  };
}

/** Transcript records that carry nothing for the log (UI state, request shapes, cost snapshots). */
const TRANSCRIPT_NOISE = new Set([
  "mode",
  "permission-mode",
  "atis-latch",
  "tools-used",
  "file-history-snapshot",
  "attachment",
  "api-request",
  "api-request-shape",
  "api-request-blob",
  "last-prompt",
  "cost-state",
  "summary",
]);

/**
 * The TUI's transcript (~/.claude/projects/<dir>/<session>.jsonl): the same
 * user and assistant records as the headless stream, the typed prompt as a
 * user message with string content, and a `turn_duration` system record when
 * a turn is done. There are no token deltas in it.
 */
export function claudeTranscriptMapper(): Mapper {
  const e = new Emitter();
  const stream = claudeMapper(e);
  return {
    line: jsonLines((rec, text) => {
      const type = str(rec.type) ?? "";
      if (TRANSCRIPT_NOISE.has(type)) return [];
      if (type === "user" && typeof obj(rec.message)?.content === "string") {
        return [...e.working(), ...e.message(str(rec.uuid) ?? "prompt", str(obj(rec.message)!.content) ?? "", "user")];
      }
      if (type === "assistant") {
        const msg = obj(rec.message);
        const u = obj(msg?.usage);
        const out = stream.line(text);
        // A model call that failed for good ends the turn with no turn_duration record after it.
        if (rec.isApiErrorMessage === true)
          return [
            ...out,
            ...e.failed(`claude: ${Array.isArray(msg?.content) ? msg.content.map((b) => str(obj(b)?.text) ?? "").join(" ") : "API error"}`),
          ];
        return msg?.stop_reason && u ? [...out, ...e.usage(u.input_tokens, u.output_tokens, u.cache_read_input_tokens)] : out;
      }
      // The turn is done; the next prompt makes it busy again.
      if (type === "system" && rec.subtype === "turn_duration") return e.idle();
      return stream.line(text);
    }),
    end: () => [],
  };
}

/**
 * The box's MCP server as `--mcp-config` JSON (argv, not a file: it changes
 * every run). Its bearer token is left to Claude Code's own `${VAR}`
 * expansion from the environment, so the argv a session logs holds none.
 */
function mcpArgs(ctx: AgentContext): string[] {
  if (!ctx.mcp) return [];
  const server = { type: "http", url: ctx.mcp.url, headers: { Authorization: `Bearer \${${MCP_TOKEN_ENV}}` } };
  return ["--mcp-config", JSON.stringify({ mcpServers: { [ctx.mcp.name]: server } })];
}

const MCP_TOKEN_ENV = "HUTCH_MCP_TOKEN";

/**
 * Its prompts off (the box is the sandbox), or, asked to (`--permissions
 * ask`), its own permission check with the box's MCP server as the prompt:
 * what that check holds goes to a person through hutch approvals.
 */
function permissionArgs(ctx: AgentContext): string[] {
  if (ctx.permissions === "ask" && ctx.mcp)
    return ["--permission-mode", "default", "--permission-prompt-tool", `mcp__${ctx.mcp.name}__${MCP_APPROVAL_TOOL}`];
  return ["--dangerously-skip-permissions"];
}

/** A headless turn's flags, the prompt aside (in argv, or on stdin for a warm agent). */
function headlessArgs(ctx: AgentContext, resume: Resume): string[] {
  return [
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--include-partial-messages",
    ...permissionArgs(ctx),
    ...(typeof resume === "string" ? ["--resume", resume] : resume ? ["--continue"] : []),
    ...(ctx.model ? ["--model", ctx.model] : []),
    ...mcpArgs(ctx),
  ];
}

export const claude: Harness = {
  name: "claude",
  npm: { name: "@anthropic-ai/claude-code", version: "2.1.332", bin: "claude" },
  bindings: [...AGENT_BINDINGS.claude],
  egress: [],
  env: (ctx) => ({
    ANTHROPIC_BASE_URL: ctx.endpoint("anthropic"),
    ANTHROPIC_API_KEY: ctx.stub("anthropic"),
    // Without this it calls the vendor directly whatever ANTHROPIC_BASE_URL says (measured: DISABLE_TELEMETRY alone does not stop it).
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    // The box is the sandbox; as root (VMs) --dangerously-skip-permissions is refused without it.
    IS_SANDBOX: "1",
    ...(ctx.mcp ? { [MCP_TOKEN_ENV]: ctx.mcp.token } : {}),
  }),
  // The TUI's first-run questions, answered for a box: onboarding, folder trust, using the
  // (stub) API key from the environment (it remembers a key by its last 20 characters), and bypass mode.
  files: (ctx) => ({
    ".claude.json": JSON.stringify({
      hasCompletedOnboarding: true,
      theme: "dark",
      customApiKeyResponses: { approved: [ctx.stub("anthropic").trim().slice(-20)], rejected: [] },
      projects: { [ctx.workdir]: { hasTrustDialogAccepted: true, hasCompletedProjectOnboarding: true } },
    }),
    ".claude/settings.json": JSON.stringify({ skipDangerousModePermissionPrompt: true }),
  }),
  headless: (prompt, ctx, resume) => [...headlessArgs(ctx, resume), "--", prompt],
  // The Agent SDK's streaming input: one user message a line on stdin, a result record ends each turn.
  warm: {
    args: (ctx, resume) => ["--input-format", "stream-json", ...headlessArgs(ctx, resume)],
    message: (prompt) =>
      `${JSON.stringify({ type: "user", message: { role: "user", content: prompt }, parent_tool_use_id: null, session_id: "" })}\n`,
    interrupt: (requestId) => `${JSON.stringify({ type: "control_request", request_id: requestId, request: { subtype: "interrupt" } })}\n`,
    // The Agent SDK's first request: answered once Claude Code has started and reads its input (~0.4 s on the host).
    ready: (requestId) => `${JSON.stringify({ type: "control_request", request_id: requestId, request: { subtype: "initialize" } })}\n`,
    control: (line) => {
      if (!line.startsWith('{"type":"control_response"')) return null;
      try {
        const id = (JSON.parse(line) as { response?: { request_id?: unknown } }).response?.request_id;
        return typeof id === "string" ? id : "";
      } catch {
        return "";
      }
    },
  },
  interactive: (ctx) => ["--dangerously-skip-permissions", ...(ctx.model ? ["--model", ctx.model] : []), ...mcpArgs(ctx)],
  mapper: () => claudeMapper(),
  asksPermission: true,
  transcript: {
    args: (agentSession, resume) => (resume ? ["--resume", agentSession] : ["--session-id", agentSession]),
    path: (ctx, agentSession) => `${ctx.home}/.claude/projects/${ctx.workdir.replace(/[^A-Za-z0-9]/g, "-")}/${agentSession}.jsonl`,
    mapper: claudeTranscriptMapper,
  },
  stop: { signal: "INT", graceMs: 5000 },
};
