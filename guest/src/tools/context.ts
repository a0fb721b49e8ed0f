// What every tool handler gets: configuration and the guest-wide tables.
import type { MuxStream } from "@hutch/shared/wire";
import type { GuestConfig } from "../config.ts";
import type { Logger } from "../log.ts";
import type { PathPolicy } from "../paths.ts";
import type { ProcessTable } from "../procs.ts";
import type { PtyTable } from "./pty.ts";
import type { NetTable } from "./net.ts";
import type { BrowserTable } from "./browser/index.ts";
import type { DesktopTable } from "./desktop/index.ts";
import type { McpTable } from "../mcp/index.ts";
import { toStreamError } from "./base.ts";

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

/** Runs a handler, closing the stream with its error if it throws. */
export function guard(stream: MuxStream, ctx: ToolContext, tool: string, run: () => Promise<void>): void {
  run().catch((err: unknown) => {
    const error = toStreamError(err);
    ctx.log.debug("tool failed", { tool, stream: stream.id, code: error.code });
    stream.close(error);
  });
}
