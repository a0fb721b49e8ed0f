// One byte stream of the mux joined to a socket, with credit as the only
// buffer: stream bytes are credited back once the socket took them, and the
// socket is paused until the peer grants credit for what it read. The guest
// (a box's loopback connection) and the host (the broker's relay) use it.
import type { MuxStream, StreamHandlers } from "./mux.ts";

/** What of a node:net socket the join uses (shared imports no runtime). */
export interface JoinableSocket {
  write(bytes: Uint8Array): boolean;
  once(event: "drain", fn: () => void): unknown;
  on(event: "data", fn: (chunk: Uint8Array) => void): unknown;
  on(event: "end" | "close" | "error", fn: () => void): unknown;
  pause(): unknown;
  resume(): unknown;
  end(): unknown;
  destroy(): unknown;
}

/**
 * Joins `stream` to `sock`: stream data on channel `into` goes to the socket,
 * socket data goes out on channel `outOf`. Each half's end passes through;
 * the stream closing, or the socket closing or failing, ends both.
 * `install` puts the handlers on the stream with autoCredit off (the guest
 * replays frames that arrived before it, the host sets them directly).
 */
export function joinSocket(
  stream: MuxStream,
  sock: JoinableSocket,
  into: number,
  outOf: number,
  install: (h: StreamHandlers) => void,
): void {
  const finish = () => {
    sock.destroy();
    if (!stream.closed) stream.close();
  };
  install({
    data: (chan, bytes) => {
      if (chan !== into) return;
      if (sock.write(bytes)) stream.consumed(bytes.length);
      else sock.once("drain", () => stream.consumed(bytes.length));
    },
    eof: (chan) => {
      if (chan === into) sock.end();
    },
    close: () => sock.destroy(),
  });
  sock.on("data", (chunk) => {
    sock.pause();
    void stream.write(outOf, chunk).then((ok) => (ok ? sock.resume() : finish()));
  });
  sock.on("end", () => {
    if (!stream.closed) stream.eof(outOf);
  });
  sock.on("close", () => {
    if (!stream.closed) stream.close();
  });
  sock.on("error", finish);
  sock.resume();
}
