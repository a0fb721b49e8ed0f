// Request/response tools (pty.list, fs.stat, …): open, wait for the result, close.
// The result comes from the box: it is checked against the tool's schema before use.
import { check, firstError, HutchError, type Static, type TSchema, type ToolOpen } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { openToolStream, streamError } from "./stream.ts";

export async function callTool<S extends TSchema>(daemon: DaemonClient, box: string, call: ToolOpen, schema: S): Promise<Static<S>> {
  const { stream, close } = await openToolStream(daemon, box, call);
  try {
    return await new Promise<Static<S>>((resolve, reject) => {
      let result: { value: unknown } | null = null;
      stream.handlers = {
        msg(m) {
          const msg = m as { type: string; value?: unknown };
          if (msg.type === "result") result = { value: msg.value };
        },
        close(error) {
          if (error) return reject(streamError(error));
          if (result && check(schema, result.value)) return resolve(result.value);
          if (result) return reject(new HutchError("failed", `the box answered ${call.tool} with a malformed result: ${firstError(schema, result.value)}`, "the guest may be broken: hutch box info " + box));
          reject(new HutchError("failed", `${call.tool} ended without a result`));
        },
      };
    });
  } finally {
    close();
  }
}
