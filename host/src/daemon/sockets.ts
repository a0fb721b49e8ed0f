// Bun.serve takes one WebSocket handler; this routes each socket to the
// handler of the endpoint it was upgraded on (subscribe sockets carry kind).
import type { ServerWebSocket, WebSocketHandler } from "bun";
import type { StreamSocketData } from "./stream/index.ts";
import type { SubscribeData } from "./sessions/subscribe.ts";

export type Data = StreamSocketData | SubscribeData;
const isSub = (ws: ServerWebSocket<Data>): ws is ServerWebSocket<SubscribeData> => (ws.data as SubscribeData).kind === "subscribe";

/** Told of every socket as it opens and closes (server mode keeps each token's open sockets). */
export interface SocketTracker {
  open(ws: ServerWebSocket<Data>): void;
  close(ws: ServerWebSocket<Data>): void;
}

export function socketHandlers(
  streams: WebSocketHandler<StreamSocketData>,
  subs: WebSocketHandler<SubscribeData>,
  tracker?: SocketTracker,
): WebSocketHandler<Data> {
  const asStream = (ws: ServerWebSocket<Data>) => ws as ServerWebSocket<StreamSocketData>;
  return {
    maxPayloadLength: Math.max(streams.maxPayloadLength ?? 0, subs.maxPayloadLength ?? 0) || undefined,
    backpressureLimit: Math.max(streams.backpressureLimit ?? 0, subs.backpressureLimit ?? 0) || undefined,
    open: (ws) => {
      tracker?.open(ws);
      return isSub(ws) ? subs.open?.(ws) : streams.open?.(asStream(ws));
    },
    message: (ws, m) => (isSub(ws) ? subs.message?.(ws, m) : streams.message?.(asStream(ws), m)),
    drain: (ws) => (isSub(ws) ? subs.drain?.(ws) : streams.drain?.(asStream(ws))),
    close: (ws, code, reason) => {
      tracker?.close(ws);
      return isSub(ws) ? subs.close?.(ws, code, reason) : streams.close?.(asStream(ws), code, reason);
    },
  };
}
