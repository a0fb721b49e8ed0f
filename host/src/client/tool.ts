// Request/response tools (pty.list, fs.stat, …): open, wait for the result, close.
// The result comes from the box: it is checked against the tool's schema before use.
import { follow, HutchError, resultOf, type Static, type TSchema, type ToolOpen } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { openToolStream, streamError } from "./stream.ts";

export async function callTool<S extends TSchema>(daemon: DaemonClient, box: string, call: ToolOpen, schema: S): Promise<Static<S>> {
  return (await callToolBytes(daemon, box, call, schema, 0)).value;
}

/**
 * A tool that also sends bytes on chan 1 (a screenshot): at most `maxBytes`
 * of them are kept; a box that sends more is refused, not buffered.
 */
export async function callToolBytes<S extends TSchema>(
  daemon: DaemonClient,
  box: string,
  call: ToolOpen,
  schema: S,
  maxBytes: number,
): Promise<{ value: Static<S>; bytes: Uint8Array }> {
  const { stream, close } = await openToolStream(daemon, box, call);
  const chunks: Uint8Array[] = [];
  let size = 0;
  let over = false;
  try {
    const end = await follow(stream, {
      onData(chan, bytes) {
        if (chan !== 1 || over) return;
        size += bytes.length;
        if (size > maxBytes) {
          over = true;
          close();
        } else chunks.push(bytes);
      },
    });
    if (over)
      throw new HutchError(
        "failed",
        `the box sent more than ${maxBytes} bytes for ${call.tool}`,
        `the guest may be broken: hutch box info ${box}`,
      );
    return {
      value: resultOf(end, call.tool, schema, streamError, `the guest may be broken: hutch box info ${box}`),
      bytes: Buffer.concat(chunks),
    };
  } finally {
    close();
  }
}
