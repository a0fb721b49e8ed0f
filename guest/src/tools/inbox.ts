// Frames can arrive right behind the OPEN, while a tool is still awaiting
// its setup (resolving a path, spawning). holdFrames() keeps them, uncredited
// so the peer can send at most one window, until the tool installs its
// handlers with takeFrames() and they are replayed in order.
import type { MuxStream, StreamError, StreamHandlers } from "@hutch/shared/wire";

type Held =
  | { kind: "data"; chan: number; bytes: Uint8Array }
  | { kind: "eof"; chan: number }
  | { kind: "msg"; msg: unknown }
  | { kind: "close"; error: StreamError | undefined };

const held = new WeakMap<MuxStream, Held[]>();

export function holdFrames(stream: MuxStream): void {
  const frames: Held[] = [];
  held.set(stream, frames);
  stream.autoCredit = false;
  stream.handlers = {
    data: (chan, bytes) => frames.push({ kind: "data", chan, bytes }),
    eof: (chan) => frames.push({ kind: "eof", chan }),
    msg: (msg) => frames.push({ kind: "msg", msg }),
    close: (error) => frames.push({ kind: "close", error }),
  };
}

/**
 * Installs the tool's handlers and replays what arrived before them.
 * With autoCredit, received data is credited on arrival (the tool buffers
 * nothing it cannot hold); without it, the tool calls stream.consumed().
 */
export function takeFrames(stream: MuxStream, handlers: StreamHandlers, autoCredit: boolean): void {
  const frames = held.get(stream) ?? [];
  held.delete(stream);
  stream.handlers = handlers;
  stream.autoCredit = autoCredit;
  for (const f of frames) {
    switch (f.kind) {
      case "data":
        handlers.data?.(f.chan, f.bytes);
        if (autoCredit) stream.consumed(f.bytes.length);
        break;
      case "eof":
        handlers.eof?.(f.chan);
        break;
      case "msg":
        handlers.msg?.(f.msg);
        break;
      case "close":
        handlers.close?.(f.error);
        break;
    }
  }
}
