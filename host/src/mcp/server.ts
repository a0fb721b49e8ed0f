// `hutch mcp`: an MCP server on stdio (the official SDK) whose tools act on
// boxes through the daemon API, like any other client. Each call on a box is
// two events in that box's session log (mcp.tool.called, then
// mcp.tool.completed), appended through the API so the daemon stamps the
// actor: agent kind, named `mcp.<client>` after the MCP client's own name.
// Arguments are checked against the schemas in shared/src/mcp.ts before
// anything is sent; a bad call is a tool error, and the server keeps serving.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { check, firstError, HUTCH_VERSION, HutchError, McpTools, type McpToolName } from "@hutch/shared";
import { connectDaemon, type DaemonClient } from "../client/daemon.ts";
import { callTool as runTool } from "./tools.ts";
import { SessionTrail } from "./trail.ts";

/** The actor name for an MCP client: `mcp.` and its name folded to what the daemon accepts. */
export function actorName(clientName: string | undefined): string {
  const folded = (clientName ?? "client")
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 56);
  return `mcp.${folded || "client"}`;
}

export function buildServer(home: string, connect: (home: string, name: string) => Promise<DaemonClient> = defaultConnect): Server {
  const server = new Server({ name: "hutch", version: HUTCH_VERSION }, { capabilities: { tools: {} } });
  let daemon: Promise<DaemonClient> | undefined;
  let trail: SessionTrail | undefined;
  const client = () => {
    daemon ??= connect(home, actorName(server.getClientVersion()?.name));
    return daemon;
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(McpTools).map(([name, t]) => ({ name, description: t.description, inputSchema: t.input as { type: "object" } })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (req): Promise<CallToolResult> => {
    const name = req.params.name;
    if (!Object.hasOwn(McpTools, name)) return failure(`no tool ${JSON.stringify(name)}; tools/list names them`);
    const tool = McpTools[name as McpToolName];
    const args = req.params.arguments ?? {};
    if (!check(tool.input, args)) return failure(`${name}: ${firstError(tool.input, args)}`);
    let d: DaemonClient;
    try {
      d = await client();
    } catch (err) {
      return failure(message(err));
    }
    trail ??= new SessionTrail(d);
    const box = typeof (args as { box?: unknown }).box === "string" ? (args as { box: string }).box : undefined;
    const started = Date.now();
    const callId = await trail.called(box, name, args);
    try {
      const result = await runTool(d, name as McpToolName, args);
      await trail.completed(box, callId, name, "ok", summary(result), Date.now() - started);
      return result;
    } catch (err) {
      await trail.completed(box, callId, name, "error", message(err), Date.now() - started);
      return failure(message(err));
    }
  });
  return server;
}

function defaultConnect(home: string, name: string): Promise<DaemonClient> {
  return connectDaemon(home, { kind: "agent", name });
}

function message(err: unknown): string {
  if (err instanceof HutchError) return err.hint ? `${err.message}\n(next: ${err.hint})` : err.message;
  return (err as Error).message ?? String(err);
}

function failure(text: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text }] };
}

/** What the session log keeps of a result: its text, cut; an image by its size. */
function summary(r: CallToolResult): string {
  return r.content
    .map((c) =>
      c.type === "text" ? c.text : c.type === "image" ? `[${c.mimeType}, ${Math.floor((c.data.length * 3) / 4)} bytes]` : `[${c.type}]`,
    )
    .join("\n")
    .slice(0, 4000);
}

/** Serves on stdin/stdout until the client closes stdin (the SDK's transport does not notice that by itself). */
export async function serveStdio(home: string, transport: Transport = new StdioServerTransport()): Promise<void> {
  const server = buildServer(home);
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  process.stdin.once("end", () => void server.close());
  await server.connect(transport);
  await closed;
}
