// Bun.serve takes one WebSocket handler; this routes each socket to the
// handler of the endpoint it was upgraded on (subscribe sockets carry kind).
import type { ServerWebSocket, WebSocketHandler } from "bun";
import type { StreamSocketData } from "./stream/index.ts";
import type { SubscribeData } from "./sessions/subscribe.ts";

type Data = StreamSocketData | SubscribeData;
const isSub = (ws: ServerWebSocket<Data>): ws is ServerWebSocket<SubscribeData> => (ws.data as SubscribeData).kind === "subscribe";

export function socketHandlers(streams: WebSocketHandler<StreamSocketData>, subs: WebSocketHandler<SubscribeData>): WebSocketHandler<Data> {
  const asStream = (ws: ServerWebSocket<Data>) => ws as ServerWebSocket<StreamSocketData>;
  return {
    maxPayloadLength: Math.max(streams.maxPayloadLength ?? 0, subs.maxPayloadLength ?? 0) || undefined,
    backpressureLimit: Math.max(streams.backpressureLimit ?? 0, subs.backpressureLimit ?? 0) || undefined,
    open: (ws) => (isSub(ws) ? subs.open?.(ws) : streams.open?.(asStream(ws))),
    message: (ws, m) => (isSub(ws) ? subs.message?.(ws, m) : streams.message?.(asStream(ws), m)),
    drain: (ws) => (isSub(ws) ? subs.drain?.(ws) : streams.drain?.(asStream(ws))),
    close: (ws, code, reason) => (isSub(ws) ? subs.close?.(ws, code, reason) : streams.close?.(asStream(ws), code, reason)),
  };
}
