// What every tool handler gets: configuration and the guest-wide tables.
import type { MuxStream, StreamError, ToolOpen } from "@hutch/shared/wire";
import type { GuestConfig } from "../config.ts";
import type { Logger } from "../log.ts";
import { PathError, type PathPolicy } from "../paths.ts";
import type { ProcessTable } from "../procs.ts";
import type { PtyTable } from "./pty.ts";
import type { NetTable } from "./net.ts";
import type { BrowserTable } from "./browser/index.ts";
import type { DesktopTable } from "./desktop/index.ts";
import type { McpTable } from "../mcp/index.ts";

/**
 * Where a request/response tool answers: a host stream, or the guest's own
 * MCP server collecting the answer (guest/src/mcp/capture.ts).
 */
export type Replier = Pick<MuxStream, "msg" | "close" | "write" | "eof">;

/** The validated OPEN payload of one tool. */
export type Req<T extends ToolOpen["tool"]> = Extract<ToolOpen, { tool: T }>;

export interface ToolContext {
  config: GuestConfig;
  paths: PathPolicy;
  procs: ProcessTable;
  ptys: PtyTable;
  net: NetTable;
  browser: BrowserTable;
  desktop: DesktopTable;
  mcp: McpTable;
  log: Logger;
}

/** A tool's refusal with the code the host maps to a status and exit code. */
export class ToolError extends Error {
  constructor(
    readonly code: "invalid" | "not_found" | "not_ready" | "conflict" | "denied" | "failed" | "unavailable",
    message: string,
  ) {
    super(message);
  }
}

/** Maps a thrown error to the close payload the host sees. */
export function toStreamError(err: unknown, path?: string): StreamError {
  if (err instanceof PathError || err instanceof ToolError) return { code: err.code, message: err.message };
  const e = err as NodeJS.ErrnoException;
  const where = path ?? e.path ?? "";
  switch (e.code) {
    case "ENOENT":
      return { code: "not_found", message: `${where}: no such file or directory` };
    case "EEXIST":
      return { code: "exists", message: `${where}: already exists` };
    case "EACCES":
    case "EPERM":
      return { code: "failed", message: `${where}: permission denied` };
    case "ENOTDIR":
      return { code: "failed", message: `${where}: not a directory` };
    case "EISDIR":
      return { code: "failed", message: `${where}: is a directory` };
  }
  return { code: "failed", message: e.message ?? String(err) };
}

/** Runs a handler, closing the stream with its error if it throws. */
export function guard(stream: MuxStream, ctx: ToolContext, tool: string, run: () => Promise<void>): void {
  run().catch((err: unknown) => {
    const error = toStreamError(err);
    ctx.log.debug("tool failed", { tool, stream: stream.id, code: error.code });
    stream.close(error);
  });
}
