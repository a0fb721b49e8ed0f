// The MCP server an agent in a box gets: hutch-guest's own (guest/src/mcp/),
// serving the browser and desktop tools on the box's loopback while the
// stream opened here stays open. One per agent run; the client connecting
// and every call it reports become mcp.client.connected, mcp.tool.called
// and mcp.tool.completed in the run's session, attributed to the agent. What the guest reports is untrusted: each message
// is checked against its schema, and one that does not fit is dropped.
// An agent whose box cannot serve MCP runs without it (logged).
import {
  check,
  emit,
  Events,
  McpApprovalMsg,
  McpCallMsg,
  McpClientMsg,
  McpDoneMsg,
  McpServeResult,
  type McpApprovalAnswerMsg,
  type Static,
} from "@hutch/shared";
import type { Channel } from "../engine/channel.ts";
import { log } from "../log.ts";
import type { MappedEvent } from "./types.ts";

const logger = log.create({ service: "harness.mcp" });

/** What agents call the server (Claude Code's tools are then `mcp__hutch__browser_snapshot`). */
export const MCP_SERVER_NAME = "hutch";
const OPEN_TIMEOUT_MS = 10_000;

export interface BoxMcp {
  /** http://127.0.0.1:PORT/mcp inside the box. */
  url: string;
  /** The bearer token the server wants. */
  token: string;
  /** Stops the server. Idempotent. */
  close(): void;
}

/** Whether the agent may use a tool, as a person answered (or the expiry); what the agent is told when not. */
export type ToolApproval = (tool: string, input: unknown) => Promise<{ allow: boolean; message: string }>;

/**
 * Opens the box's MCP server for `owner` (who its desktop input is held by)
 * and hands each call it reports to `record`; null when the box cannot serve
 * one (an error from the guest, or no answer in time). With `approve`, it
 * also serves the agent's permission prompt, each ask answered by it.
 */
export function openBoxMcp(
  channel: Channel,
  owner: string,
  record: (events: MappedEvent[]) => void,
  approve?: ToolApproval,
): Promise<BoxMcp | null> {
  const stream = channel.mux.open({ tool: "mcp.serve", owner: owner.slice(0, 300), ...(approve ? { approvals: true } : {}) });
  return new Promise((resolve) => {
    let answered = false;
    const answer = (v: BoxMcp | null) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      resolve(v);
    };
    const timer = setTimeout(() => {
      logger.warn("the box's MCP server did not answer; the agent runs without it");
      stream.close();
      answer(null);
    }, OPEN_TIMEOUT_MS);
    stream.handlers = {
      msg(m) {
        const type = (m as { type?: unknown } | null)?.type;
        if (type === "result" && !answered) {
          const value = (m as { value?: unknown }).value;
          if (!check(McpServeResult, value)) {
            stream.close();
            return answer(null);
          }
          answer({ url: `http://127.0.0.1:${value.port}/mcp`, token: value.token, close: () => stream.close() });
        } else if (type === "mcp.call" && check(McpCallMsg, m)) {
          record([emit(Events.mcpToolCalled, { id: m.id, name: m.name, input: m.input })]);
        } else if (type === "mcp.approval" && approve && check(McpApprovalMsg, m)) {
          const answer = (a: { allow: boolean; message: string }) => {
            const msg: McpApprovalAnswerMsg = { type: "mcp.approval.answer", id: m.id, allow: a.allow, message: a.message.slice(0, 2048) };
            if (!stream.closed) stream.msg(msg);
          };
          approve(m.tool, m.input).then(answer, (err: Error) => answer({ allow: false, message: err.message }));
        } else if (type === "mcp.client" && check(McpClientMsg, m)) {
          record([emit(Events.mcpClientConnected, { name: m.name, version: m.version })]);
        } else if (type === "mcp.done" && check(McpDoneMsg, m)) {
          const d: Static<typeof McpDoneMsg> = m;
          record([emit(Events.mcpToolCompleted, { id: d.id, name: d.name, status: d.status, output: d.output, ms: d.ms })]);
        }
      },
      close(error) {
        if (!answered) logger.warn("the box cannot serve MCP; the agent runs without it", { error: error?.message ?? "closed" });
        answer(null);
      },
    };
  });
}
