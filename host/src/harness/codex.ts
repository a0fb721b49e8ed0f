// Codex (@openai/codex). Headless: `codex exec --json` prints JSONL thread
// events: thread.started, turn.started, item.started/updated/completed (agent
// messages, reasoning, command executions, file changes, errors) and
// turn.completed with usage, or turn.failed. It streams whole items, not
// token deltas, so a message's one delta is its whole text. Flags checked
// against `codex exec --help` of the pinned version.
import { AGENT_BINDINGS } from "@hutch/shared/base";
import { MCP_APPROVAL_TOOL } from "@hutch/shared";
import { Emitter } from "./emit.ts";
import { jsonLines, obj, raw, str } from "./limits.ts";
import type { AgentContext, Harness, MappedEvent, Mapper } from "./types.ts";

/** Item types that are the agent acting (tool calls), with the input they carry. */
function toolOf(item: Record<string, unknown>): { name: string; input: unknown } {
  if (item.type === "command_execution") return { name: "shell", input: { command: item.command } };
  if (item.type === "mcp_tool_call") return { name: `${str(item.server) ?? "mcp"}.${str(item.tool) ?? "tool"}`, input: item.arguments };
  const { id: _id, status: _status, aggregated_output: _out, ...rest } = item;
  return { name: str(item.type) ?? "tool", input: rest };
}

function toolResult(item: Record<string, unknown>): { output: string; ok: boolean } {
  if (item.type === "command_execution") {
    return { output: str(item.aggregated_output) ?? "", ok: item.exit_code === 0 && item.status !== "failed" };
  }
  const output = item.result ?? item.error ?? item.changes ?? "";
  return { output: typeof output === "string" ? output : JSON.stringify(output), ok: item.status !== "failed" && !item.error };
}

export function codexMapper(): Mapper {
  const e = new Emitter();
  const item = (rec: Record<string, unknown>, done: boolean, text: string): MappedEvent[] => {
    const it = obj(rec.item);
    const id = str(it?.id);
    if (!it || !id) return [raw(text, "invalid")];
    switch (it.type) {
      case "agent_message":
        return done ? [...e.delta(id, str(it.text) ?? ""), ...e.message(id, str(it.text) ?? "")] : [];
      case "reasoning":
        return done ? e.message(id, str(it.text) ?? "", "reasoning") : [];
      case "error":
        return done ? e.error(`codex: ${str(it.message) ?? "error"}`) : [];
      case "todo_list":
        return [raw(text, "unknown")];
      default: {
        const call = toolOf(it);
        if (!done) return e.toolCalled(id, call.name, call.input);
        const r = toolResult(it);
        return e.toolCompleted(id, r.output, r.ok, call);
      }
    }
  };
  return {
    line: jsonLines((rec, text) => {
      switch (rec.type) {
        case "thread.started":
        case "turn.started":
          return e.working();
        case "item.started":
          return item(rec, false, text);
        case "item.updated":
          return [];
        case "item.completed":
          return item(rec, true, text);
        case "turn.completed": {
          const u = obj(rec.usage);
          return [...(u ? e.usage(u.input_tokens, u.output_tokens, u.cached_input_tokens) : e.usage(null, null, null)), ...e.idle()];
        }
        case "turn.failed":
          return e.failed(`codex: ${str(obj(rec.error)?.message) ?? "the turn failed"}`);
        case "error":
          return e.error(`codex: ${str(rec.message) ?? "error"}`);
        default:
          return [raw(text, "unknown")];
      }
    }),
    end: (exit) => e.exited(exit),
  };
}

const toml = (s: string) => JSON.stringify(s);

/**
 * `--permissions ask` for Codex, which has no permission prompt to hand over
 * in `exec`: a PreToolUse hook (Codex runs it before every tool call, the
 * call as JSON on stdin) asks the box's MCP server's approval prompt, the
 * same one Claude Code calls (a person answers in hutch approvals), and
 * exit 2 blocks the call with the reason on stderr, which the model is told.
 * Anything that goes wrong blocks too: it fails closed. POSIX sh, sed and
 * curl only (no jq in a box); the rename of `tool_input` is of the first
 * such key, the top-level one (a string's quotes are escaped in JSON).
 */
const ASK_HOOK_PATH = ".codex/hutch-ask.sh";
/** Longer than an approval waits (10 minutes, or the box's own): its expiry answers first. */
const ASK_TIMEOUT_S = 900;
const ASK_HOOK = [
  "#!/bin/sh",
  "# Written by hutch for `--permissions ask`: each tool call waits for a person (hutch approvals).",
  `in=$(sed 's/"tool_input":/"input":/')`,
  `out=$(printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${MCP_APPROVAL_TOOL}","arguments":%s}}' "$in" |`,
  `  curl -sS --max-time ${ASK_TIMEOUT_S} -H "Authorization: Bearer $HUTCH_MCP_TOKEN" -H "content-type: application/json" --data-binary @- "$HUTCH_MCP_URL") ||`,
  `  { echo "hutch could not ask for approval, so this call is refused" >&2; exit 2; }`,
  `case "$out" in *'"text":"{\\"behavior\\":\\"allow\\"'*) exit 0 ;; esac`,
  `reason=$(printf '%s' "$out" | sed -n 's/.*\\\\"message\\\\":\\\\"\\([^\\\\]*\\)\\\\".*/\\1/p')`,
  `echo "refused through hutch approvals: \${reason:-not approved}" >&2`,
  "exit 2",
  "",
].join("\n");

const asks = (ctx: AgentContext) => ctx.permissions === "ask";
/** Without a model named, this Codex sends its first request with no tools at all (seen against the fake API). */
const model = (ctx: AgentContext) => ctx.model ?? "gpt-5-codex";

export const codex: Harness = {
  name: "codex",
  npm: { name: "@openai/codex", version: "0.171.0", bin: "codex" },
  bindings: [...AGENT_BINDINGS.codex],
  egress: [],
  env: (ctx) => ({
    OPENAI_API_KEY: ctx.stub("openai"),
    ...(ctx.mcp ? { HUTCH_MCP_TOKEN: ctx.mcp.token } : {}),
    ...(asks(ctx) && ctx.mcp ? { HUTCH_MCP_URL: ctx.mcp.url } : {}),
  }),
  // A provider of our own: the built-in one ignores OPENAI_BASE_URL and
  // prefers a WebSocket to the vendor; this one speaks HTTPS Responses to the broker.
  files: (ctx) => ({
    ".codex/config.toml": [
      `model_provider = "hutch"`,
      `model = ${toml(model(ctx))}`,
      `check_for_update_on_startup = false`,
      ``,
      `[model_providers.hutch]`,
      `name = "hutch broker"`,
      `base_url = ${toml(`${ctx.endpoint("openai")}/v1`)}`,
      `env_key = "OPENAI_API_KEY"`,
      `wire_api = "responses"`,
      ``,
      `[projects.${toml(ctx.workdir)}]`,
      `trust_level = "trusted"`,
      ``,
      // The box's MCP server (streamable HTTP); its token comes from the environment, so the file holds none.
      ...(ctx.mcp ? [`[mcp_servers.${ctx.mcp.name}]`, `url = ${toml(ctx.mcp.url)}`, `bearer_token_env_var = "HUTCH_MCP_TOKEN"`, ``] : []),
      // Asked to (`--permissions ask`): every tool call goes past a person first (ASK_HOOK).
      ...(asks(ctx)
        ? [
            `[[hooks.PreToolUse]]`,
            `[[hooks.PreToolUse.hooks]]`,
            `type = "command"`,
            `command = ${toml(`sh ${ctx.home}/${ASK_HOOK_PATH}`)}`,
            `timeout = ${ASK_TIMEOUT_S}`,
            ``,
          ]
        : []),
    ].join("\n"),
    ...(asks(ctx) ? { [ASK_HOOK_PATH]: ASK_HOOK } : {}),
  }),
  headless: (prompt, ctx, resume) => [
    "exec",
    "--json",
    "--skip-git-repo-check",
    // The box is the sandbox: Codex's own (landlock/seccomp) is not nested inside it.
    "--dangerously-bypass-approvals-and-sandbox",
    // The ask hook is hutch's own, written for this run: trusted without a stored trust record.
    ...(asks(ctx) ? ["--dangerously-bypass-hook-trust"] : []),
    "-m",
    model(ctx),
    ...(typeof resume === "string" ? ["resume", resume] : resume ? ["resume", "--last"] : []),
    "--",
    prompt,
  ],
  interactive: (ctx) => ["--dangerously-bypass-approvals-and-sandbox", "-m", model(ctx)],
  mapper: codexMapper,
  asksPermission: true,
  stop: { signal: "INT", graceMs: 5000 },
};
