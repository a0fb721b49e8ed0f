// Bun.serve takes one WebSocket handler; this routes each socket to the
// handler of the endpoint it was upgraded on (subscribe and proxy sockets
// carry kind; a fleet's forwarded sockets are proxies, ./proxy-socket.ts).
import type { ServerWebSocket, WebSocketHandler } from "bun";
import type { StreamSocketData } from "./stream/index.ts";
import type { SubscribeData } from "./sessions/subscribe.ts";
import { proxySocket, type ProxySocketData } from "./proxy-socket.ts";

export type Data = StreamSocketData | SubscribeData | ProxySocketData;
const isSub = (ws: ServerWebSocket<Data>): ws is ServerWebSocket<SubscribeData> => (ws.data as SubscribeData).kind === "subscribe";
const isProxy = (ws: ServerWebSocket<Data>): ws is ServerWebSocket<ProxySocketData> => (ws.data as ProxySocketData).kind === "proxy";

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
  const proxies = proxySocket();
  return {
    maxPayloadLength: Math.max(streams.maxPayloadLength ?? 0, subs.maxPayloadLength ?? 0) || undefined,
    backpressureLimit: Math.max(streams.backpressureLimit ?? 0, subs.backpressureLimit ?? 0) || undefined,
    open: (ws) => {
      tracker?.open(ws);
      if (isProxy(ws)) return proxies.open?.(ws);
      return isSub(ws) ? subs.open?.(ws) : streams.open?.(asStream(ws));
    },
    message: (ws, m) => {
      if (isProxy(ws)) return proxies.message?.(ws, m);
      return isSub(ws) ? subs.message?.(ws, m) : streams.message?.(asStream(ws), m);
    },
    drain: (ws) => (isProxy(ws) ? undefined : isSub(ws) ? subs.drain?.(ws) : streams.drain?.(asStream(ws))),
    close: (ws, code, reason) => {
      tracker?.close(ws);
      if (isProxy(ws)) return proxies.close?.(ws, code, reason);
      return isSub(ws) ? subs.close?.(ws, code, reason) : streams.close?.(asStream(ws), code, reason);
    },
  };
}
