// mcp.serve: an MCP server for the agents inside the box, serving the
// browser and desktop tools from this process (which holds the box's
// Chromium and X display) over MCP's streamable HTTP on the box's loopback.
// It lives as long as the host's stream that asked for it (the harness opens
// one per agent run) and tells that stream of every call, so the host logs
// each one in the session, attributed to the agent.
//
// Only POST /mcp with the server's bearer token is served; a request with an
// Origin header is refused (a page in the box's own Chromium must not call
// these tools), and answers are plain JSON (no server-sent events: the server
// sends no requests or notifications of its own, so GET is 405).
import type { Server } from "bun";
import { Value } from "@sinclair/typebox/value";
import {
  MCP_OUTPUT_MAX,
  MCP_PROTOCOL_VERSIONS,
  McpApprovalAnswerMsg,
  loggedInput,
  type BoxMcpToolName,
  type McpApprovalInput,
  type MuxStream,
} from "@hutch/shared/wire";
import type { Logger } from "../log.ts";
import type { Req } from "../tools/base.ts";
import { takeFrames } from "../tools/inbox.ts";
import type { BrowserTable } from "../tools/browser/index.ts";
import type { DesktopTable } from "../tools/desktop/index.ts";
import { handleBody, INVALID_REQUEST, PARSE_ERROR, type ToolCaller } from "./rpc.ts";
import { callBoxTool, type CallToolResult } from "./tools.ts";

/** Servers one guest keeps at once; a new one past this closes the oldest (an agent that never said it ended). */
const MAX_SERVERS = 16;
const BODY_MAX = 4 * 1024 * 1024;
const DEFAULT_OWNER = "mcp";
/** The largest tool input (as JSON) the agent may ask a person about. */
const APPROVAL_INPUT_MAX = 64 * 1024;

/** What the log keeps of a result: its text, cut; an image by its size. */
function summary(r: CallToolResult): string {
  return r.content
    .map((c) => (c.type === "text" ? c.text : `[${c.mimeType}, ${Math.floor((c.data.length * 3) / 4)} bytes]`))
    .join("\n")
    .slice(0, MCP_OUTPUT_MAX);
}

function sameToken(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const rpcError = (status: number, code: number, message: string) => json(status, { jsonrpc: "2.0", id: null, error: { code, message } });

interface Served {
  server: Server<undefined>;
  stream: MuxStream;
}

export class McpTable {
  private readonly servers: Served[] = [];
  private nextCall = 1;

  constructor(
    private readonly browser: BrowserTable,
    private readonly desktop: DesktopTable,
    private readonly log: Logger,
  ) {}

  /** The ports the guest's MCP servers listen on (not the user's to forward). */
  ports(): number[] {
    return this.servers.map((s) => s.server.port).filter((p): p is number => typeof p === "number");
  }

  serve(stream: MuxStream, req: Req<"mcp.serve">): void {
    while (this.servers.length >= MAX_SERVERS) {
      const oldest = this.servers[0]!;
      this.log.info("mcp: closing the oldest server", { port: oldest.server.port });
      this.stop(oldest);
    }
    const token = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
    const tables = { browser: this.browser, desktop: this.desktop, owner: req.owner ?? DEFAULT_OWNER };
    // A client is announced once it has the tool list: from then on it can call them.
    let client: { name: string; version: string } | undefined;
    let announced = false;
    const caller: ToolCaller = {
      call: (name, args) => this.call(stream, tables, name, args),
      initialized: (c) => {
        client = c;
        announced = false;
      },
      listed: () => {
        if (announced || stream.closed) return;
        announced = true;
        stream.msg({ type: "mcp.client", ...(client ?? { name: "client", version: "" }) });
      },
    };
    // The agent's permission prompt: each ask goes to the host, which answers once a person (or the expiry) has.
    const asks = new Map<string, (allow: boolean, message: string) => void>();
    if (req.approvals) caller.approve = (input) => this.ask(stream, asks, input);
    let server: Server<undefined>;
    try {
      server = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        maxRequestBodySize: BODY_MAX,
        fetch: (r) => this.fetch(r, token, caller),
      });
    } catch (err) {
      stream.close({ code: "failed", message: `could not listen for MCP: ${(err as Error).message}` });
      return;
    }
    const served: Served = { server, stream };
    this.servers.push(served);
    takeFrames(
      stream,
      {
        msg: (m) => {
          if (!Value.Check(McpApprovalAnswerMsg, m)) return;
          const answer = asks.get(m.id);
          asks.delete(m.id);
          answer?.(m.allow, m.message);
        },
        close: () => {
          this.stop(served);
          // Nobody left to answer: what waits is denied.
          for (const answer of asks.values()) answer(false, "hutch stopped serving this agent");
          asks.clear();
        },
      },
      true,
    );
    stream.msg({ type: "result", value: { port: server.port, token } });
    this.log.debug("mcp: serving", { port: server.port, owner: tables.owner });
  }

  /**
   * Asks the host whether the agent may use a tool, and answers as Claude
   * Code's permission prompt tool must: JSON text, `{behavior: "allow",
   * updatedInput}` (the input as asked) or `{behavior: "deny", message}`.
   */
  private ask(
    stream: MuxStream,
    asks: Map<string, (allow: boolean, message: string) => void>,
    input: McpApprovalInput,
  ): Promise<CallToolResult> {
    const deny = (message: string): CallToolResult => ({
      content: [{ type: "text", text: JSON.stringify({ behavior: "deny", message }) }],
    });
    if (stream.closed) return Promise.resolve(deny("hutch stopped serving this agent"));
    // Sent whole (a person approves exactly what runs), so bounded: a frame's worth.
    if (JSON.stringify(input.input).length > APPROVAL_INPUT_MAX)
      return Promise.resolve(
        deny(`this ${input.tool_name} call is over ${APPROVAL_INPUT_MAX} bytes, too large to ask a person about; make it smaller`),
      );
    const id = `ask_${this.nextCall++}`;
    return new Promise((resolve) => {
      asks.set(id, (allow, message) =>
        resolve(
          allow ? { content: [{ type: "text", text: JSON.stringify({ behavior: "allow", updatedInput: input.input }) }] } : deny(message),
        ),
      );
      stream.msg({ type: "mcp.approval", id, tool: input.tool_name, input: input.input });
    });
  }

  private async call(
    stream: MuxStream,
    tables: Parameters<typeof callBoxTool>[0],
    name: BoxMcpToolName,
    args: Record<string, unknown>,
  ): Promise<CallToolResult> {
    const id = `call_${this.nextCall++}`;
    const started = Date.now();
    if (!stream.closed) stream.msg({ type: "mcp.call", id, name, input: loggedInput(args) });
    let result: CallToolResult;
    try {
      result = await callBoxTool(tables, name, args);
    } catch (err) {
      const output = (err as Error).message ?? String(err);
      if (!stream.closed)
        stream.msg({ type: "mcp.done", id, name, status: "error", output: output.slice(0, MCP_OUTPUT_MAX), ms: Date.now() - started });
      throw err;
    }
    if (!stream.closed)
      stream.msg({
        type: "mcp.done",
        id,
        name,
        status: result.isError ? "error" : "ok",
        output: summary(result),
        ms: Date.now() - started,
      });
    return result;
  }

  private async fetch(r: Request, token: string, caller: ToolCaller): Promise<Response> {
    const url = new URL(r.url);
    if (url.pathname !== "/mcp") return new Response("not found\n", { status: 404 });
    if (r.headers.get("origin") !== null) return new Response("no browser origin may call this server\n", { status: 403 });
    const auth = r.headers.get("authorization") ?? "";
    if (!auth.startsWith("Bearer ") || !sameToken(auth.slice(7).trim(), token))
      return new Response("a bearer token is needed\n", { status: 401, headers: { "www-authenticate": "Bearer" } });
    if (r.method !== "POST") return new Response("POST JSON-RPC messages here\n", { status: 405, headers: { allow: "POST" } });
    const version = r.headers.get("mcp-protocol-version");
    if (version !== null && !(MCP_PROTOCOL_VERSIONS as readonly string[]).includes(version))
      return rpcError(400, INVALID_REQUEST, `unsupported MCP-Protocol-Version ${version.slice(0, 32)}`);
    if (!(r.headers.get("content-type") ?? "").toLowerCase().includes("application/json"))
      return rpcError(415, INVALID_REQUEST, "the body must be application/json");
    let body: unknown;
    try {
      body = JSON.parse(await r.text());
    } catch {
      return rpcError(400, PARSE_ERROR, "the body is not JSON");
    }
    const answer = await handleBody(body, caller);
    return answer === undefined ? new Response(null, { status: 202 }) : json(200, answer);
  }

  private stop(s: Served): void {
    const i = this.servers.indexOf(s);
    if (i < 0) return;
    this.servers.splice(i, 1);
    void s.server.stop(true);
    if (!s.stream.closed) s.stream.close();
  }

  /** On shutdown. */
  stopAll(): void {
    for (const s of [...this.servers]) this.stop(s);
  }
}
