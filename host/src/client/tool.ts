// Request/response tools (pty.list, fs.stat, …): open, wait for the result, close.
// The result comes from the box: it is checked against the tool's schema before use.
import { check, firstError, follow, HutchError, type Static, type TSchema, type ToolOpen } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { openToolStream, streamError } from "./stream.ts";

export async function callTool<S extends TSchema>(daemon: DaemonClient, box: string, call: ToolOpen, schema: S): Promise<Static<S>> {
  const { stream, close } = await openToolStream(daemon, box, call);
  try {
    const { result, error } = await follow(stream);
    if (error) throw streamError(error);
    if (!result) throw new HutchError("failed", `${call.tool} ended without a result`);
    if (!check(schema, result.value))
      throw new HutchError(
        "failed",
        `the box answered ${call.tool} with a malformed result: ${firstError(schema, result.value)}`,
        `the guest may be broken: hutch box info ${box}`,
      );
    return result.value;
  } finally {
    close();
  }
}
