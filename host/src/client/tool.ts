// Request/response tools (pty.list, fs.stat, …): open, wait for the result, close.
import { HutchError, type ToolOpen } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { openToolStream, streamError } from "./stream.ts";

export async function callTool<T>(daemon: DaemonClient, box: string, call: ToolOpen): Promise<T> {
  const { stream, close } = await openToolStream(daemon, box, call);
  try {
    return await new Promise<T>((resolve, reject) => {
      let result: { value: T } | null = null;
      stream.handlers = {
        msg(m) {
          const msg = m as { type: string; value?: unknown };
          if (msg.type === "result") result = { value: msg.value as T };
        },
        close(error) {
          if (error) return reject(streamError(error));
          if (result) return resolve(result.value);
          reject(new HutchError("failed", `${call.tool} ended without a result`));
        },
      };
    });
  } finally {
    close();
  }
}
