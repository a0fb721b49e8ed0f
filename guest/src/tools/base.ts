// What tool handlers share beneath the guest-wide tables: the OPEN payload a
// handler gets, its refusals, and how an error becomes the close the host sees.
import type { MuxStream, StreamError, ToolOpen } from "@hutch/shared/wire";
import { PathError } from "../paths.ts";

/**
 * Where a request/response tool answers: a host stream, or the guest's own
 * MCP server collecting the answer (guest/src/mcp/capture.ts).
 */
export type Replier = Pick<MuxStream, "msg" | "close" | "write" | "eof">;

/** The validated OPEN payload of one tool. */
export type Req<T extends ToolOpen["tool"]> = Extract<ToolOpen, { tool: T }>;

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
