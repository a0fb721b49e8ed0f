// The host's side of one tool stream, from open to close, in one place:
// "started" comes once the process runs (stdin is then fed and closed, unless
// the caller keeps it), data is handed on by channel, "exit" and "result"
// are kept, and the close settles the whole thing. Every message is checked
// against the protocol before use: what comes out of a box is untrusted.
// Exec, the harness's agent runs and probes, the recorder's terminals and the
// CLI's request/response tools all go through it (the stream may be a guest
// channel's or a CLI's WebSocket to the daemon: both are a MuxStream).
import type { Static, TSchema } from "@sinclair/typebox";
import { HutchError } from "../errors.ts";
import { check, firstError } from "../validate.ts";
import type { MuxStream, StreamError } from "./mux.ts";
import { GuestMsg, type ExitMsg } from "./tools.ts";

type Started = Extract<GuestMsg, { type: "started" }>;

export interface FollowIo {
  /** Sent on stdin once the process started, then EOF. "open": stdin stays the caller's to write and end. Default: EOF at once. */
  stdin?: Uint8Array | string | "open";
  onStarted?(m: Started): void;
  onData?(chan: number, bytes: Uint8Array): void;
  /** Every other checked message (a screen redraw's size, a connection). */
  onMessage?(m: GuestMsg): void;
}

export interface StreamEnd {
  /** The process's start, or null when it never started (see error). */
  started: Started | null;
  exit: { code: number | null; signal: string | null } | null;
  /** A request/response tool's answer (not yet checked against the tool's own schema). */
  result?: { value: unknown };
  error?: StreamError;
}

/** Takes over the stream's handlers; resolves when it closes. */
export function follow(stream: MuxStream, io: FollowIo = {}): Promise<StreamEnd> {
  return new Promise((resolve) => {
    const end: StreamEnd = { started: null, exit: null };
    stream.handlers = {
      msg(m) {
        if (!check(GuestMsg, m)) return;
        if (m.type === "started") {
          end.started = m;
          if (io.stdin === undefined) stream.eof(0);
          else if (io.stdin !== "open") {
            const bytes = typeof io.stdin === "string" ? new TextEncoder().encode(io.stdin) : io.stdin;
            void stream.write(0, bytes).then(() => stream.eof(0));
          }
          io.onStarted?.(m);
        } else if (m.type === "exit") {
          end.exit = { code: (m as ExitMsg).code, signal: (m as ExitMsg).signal };
          io.onMessage?.(m);
        } else if (m.type === "result") {
          end.result = { value: m.value };
        } else {
          io.onMessage?.(m);
        }
      },
      data(chan, bytes) {
        io.onData?.(chan, bytes);
      },
      close(error) {
        if (error) end.error = error;
        resolve(end);
      },
    };
  });
}

/**
 * A request/response tool's answer, from its stream's end, checked against
 * the tool's schema (what a box sends is untrusted). A close with an error
 * throws `refused(error)`; no result, or one that does not fit, throws naming
 * the tool, with `brokenHint` as the next step.
 */
export function resultOf<S extends TSchema>(
  end: StreamEnd,
  tool: string,
  schema: S,
  refused: (e: StreamError) => Error,
  brokenHint: string,
): Static<S> {
  if (end.error) throw refused(end.error);
  if (!end.result) throw new HutchError("failed", `${tool} ended without a result`, brokenHint);
  if (!check(schema, end.result.value))
    throw new HutchError("failed", `the box answered ${tool} with a malformed result: ${firstError(schema, end.result.value)}`, brokenHint);
  return end.result.value;
}
