// The MCP methods hutch-guest's server answers, as JSON-RPC 2.0 over any
// transport: initialize (the client's protocol revision when it is one of
// ours, else our newest), ping, tools/list, tools/call, and the client's
// notifications (initialized, cancelled), which get no answer. The official
// SDK is not used: it would bring its schema library into a guest whose every
// module is paid again at start-up under tcg, for five methods.
//
// Errors follow JSON-RPC: a body that is not JSON is -32700, a message that
// is not a request -32600, an unknown method -32601, bad params or an unknown
// tool -32602. Arguments that do not fit a tool's schema are a tool error
// (isError), as a tool that fails is, so the model reads why and can retry.
import { Value } from "@sinclair/typebox/value";
import {
  BoxMcpTools,
  HUTCH_VERSION,
  MCP_APPROVAL_TOOL,
  MCP_PROTOCOL_VERSIONS,
  McpApprovalInput,
  type BoxMcpToolName,
} from "@hutch/shared/wire";
import type { CallToolResult } from "./tools.ts";

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;

type Id = string | number;
export type RpcResponse = { jsonrpc: "2.0"; id: Id | null } & ({ result: unknown } | { error: { code: number; message: string } });

export interface ToolCaller {
  /** Runs a tool whose arguments fit its schema. */
  call(name: BoxMcpToolName, args: Record<string, unknown>): Promise<CallToolResult>;
  /** A client initialized, naming itself (clientInfo, cut). */
  initialized?(client: { name: string; version: string }): void;
  /** A client listed the tools (it can call them from now on). */
  listed?(): void;
  /**
   * Present when the server serves the agent's permission prompt
   * (MCP_APPROVAL_TOOL): asks the host whether the agent may use a tool.
   */
  approve?(input: McpApprovalInput): Promise<CallToolResult>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is Id => typeof v === "string" || (typeof v === "number" && Number.isInteger(v));
const fail = (id: Id | null, code: number, message: string): RpcResponse => ({ jsonrpc: "2.0", id, error: { code, message } });

export const TOOL_LIST = Object.entries(BoxMcpTools).map(([name, t]) => ({ name, description: t.description, inputSchema: t.input }));
const APPROVAL_TOOL = {
  name: MCP_APPROVAL_TOOL,
  description:
    "The agent's permission prompt: asks the person running the box (hutch approvals) whether a tool call may go ahead. Called by the agent's CLI, not the model.",
  inputSchema: McpApprovalInput,
};

/** The answer to one message, or undefined for a notification (or a response, which this server never asked for). */
export async function handleMessage(msg: unknown, tools: ToolCaller): Promise<RpcResponse | undefined> {
  if (!isObject(msg) || msg.jsonrpc !== "2.0")
    return fail(isObject(msg) && isId(msg.id) ? msg.id : null, INVALID_REQUEST, "not a JSON-RPC 2.0 message");
  if (msg.method === undefined && ("result" in msg || "error" in msg)) return undefined;
  if (typeof msg.method !== "string") return fail(isId(msg.id) ? msg.id : null, INVALID_REQUEST, "method: expected a string");
  if (msg.id === undefined) return undefined;
  if (!isId(msg.id)) return fail(null, INVALID_REQUEST, "id: expected a string or an integer");
  const id = msg.id;
  const params = msg.params ?? {};
  if (!isObject(params)) return fail(id, INVALID_PARAMS, "params: expected an object");
  switch (msg.method) {
    case "initialize": {
      if (typeof params.protocolVersion !== "string") return fail(id, INVALID_PARAMS, "params.protocolVersion: expected a string");
      const asked = params.protocolVersion;
      const protocolVersion = (MCP_PROTOCOL_VERSIONS as readonly string[]).includes(asked) ? asked : MCP_PROTOCOL_VERSIONS[0];
      const info = isObject(params.clientInfo) ? params.clientInfo : {};
      const named = (v: unknown, max: number) => (typeof v === "string" ? v.slice(0, max) : "");
      tools.initialized?.({ name: named(info.name, 128) || "client", version: named(info.version, 64) });
      return {
        jsonrpc: "2.0",
        id,
        result: {
          protocolVersion,
          capabilities: { tools: { listChanged: false } },
          serverInfo: { name: "hutch", version: HUTCH_VERSION },
          instructions: "The browser and desktop of the box you run in. Snapshot a page to get refs, then act on it by ref.",
        },
      };
    }
    case "ping":
      return { jsonrpc: "2.0", id, result: {} };
    case "tools/list":
      tools.listed?.();
      return { jsonrpc: "2.0", id, result: { tools: tools.approve ? [...TOOL_LIST, APPROVAL_TOOL] : TOOL_LIST } };
    case "tools/call": {
      const name = params.name;
      if (typeof name !== "string") return fail(id, INVALID_PARAMS, "params.name: expected a string");
      if (name === MCP_APPROVAL_TOOL && tools.approve) {
        const args = params.arguments ?? {};
        if (!Value.Check(McpApprovalInput, args)) {
          const first = Value.Errors(McpApprovalInput, args).First();
          return {
            jsonrpc: "2.0",
            id,
            result: toolError(`${name}: ${first?.path || "arguments"}: ${first?.message ?? "expected an object"}`),
          };
        }
        return { jsonrpc: "2.0", id, result: await tools.approve(args) };
      }
      if (!Object.hasOwn(BoxMcpTools, name)) return fail(id, INVALID_PARAMS, `unknown tool ${JSON.stringify(name)}; tools/list names them`);
      const args = params.arguments ?? {};
      const schema = BoxMcpTools[name as BoxMcpToolName].input;
      if (!isObject(args) || !Value.Check(schema, args)) {
        const first = Value.Errors(schema, args).First();
        const field = first?.path.slice(1).replaceAll("/", ".") || "arguments";
        return { jsonrpc: "2.0", id, result: toolError(`${name}: ${field}: ${first?.message ?? "expected an object"}`) };
      }
      try {
        return { jsonrpc: "2.0", id, result: await tools.call(name as BoxMcpToolName, args) };
      } catch (err) {
        return { jsonrpc: "2.0", id, result: toolError((err as Error).message ?? String(err)) };
      }
    }
    default:
      return fail(id, METHOD_NOT_FOUND, `no method ${JSON.stringify(msg.method).slice(0, 100)}`);
  }
}

export function toolError(text: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text }] };
}

/** A parsed body: one message, or a batch (older revisions allow them); undefined when nothing needs an answer. */
export async function handleBody(body: unknown, tools: ToolCaller): Promise<RpcResponse | RpcResponse[] | undefined> {
  if (!Array.isArray(body)) return handleMessage(body, tools);
  if (body.length === 0) return fail(null, INVALID_REQUEST, "an empty batch");
  const out = (await Promise.all(body.slice(0, 100).map((m) => handleMessage(m, tools)))).filter((r) => r !== undefined);
  return out.length > 0 ? out : undefined;
}
