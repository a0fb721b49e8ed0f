// A WebSocket forwarded to the fleet server that runs its box (fleet/
// forward.ts): what the client sends goes on to that server's socket, and
// what it answers comes back, frame for frame, until either side closes. The
// client's frames wait in order while the upstream socket opens.
import type { ServerWebSocket, WebSocketHandler } from "bun";

export interface ProxySocketData {
  kind: "proxy";
  /** The upstream socket's URL, its pinned certificate and the headers that carry the caller. */
  target: { url: string; cert: string; headers: Record<string, string> };
  /** The token the client's socket was opened with (server mode): revoking it closes the socket. */
  token?: string;
  upstream?: WebSocket;
  queue: (string | Uint8Array)[];
}

/** A close code a socket may send (1005, 1006 and 1015 are only ever reported). */
const sendable = (code: number) =>
  code === 1000 || (code >= 3000 && code < 5000) || (code >= 1001 && code <= 1014 && code !== 1005 && code !== 1006) ? code : 1000;

export function proxySocket(): WebSocketHandler<ProxySocketData> {
  return {
    open(ws) {
      const d = ws.data;
      const up = new WebSocket(d.target.url, {
        headers: d.target.headers,
        tls: { ca: d.target.cert, checkServerIdentity: () => undefined },
      } as unknown as string[]);
      up.binaryType = "arraybuffer";
      d.upstream = up;
      up.onopen = () => {
        for (const m of d.queue.splice(0)) up.send(m);
      };
      up.onmessage = (e) => {
        ws.send(typeof e.data === "string" ? e.data : new Uint8Array(e.data as ArrayBuffer));
      };
      up.onclose = (e) => ws.close(sendable(e.code), e.reason);
      up.onerror = () => ws.close(1011, JSON.stringify({ code: "unavailable", message: "the server that runs the box closed the stream" }));
    },
    message(ws: ServerWebSocket<ProxySocketData>, m) {
      const d = ws.data;
      const frame = typeof m === "string" ? m : new Uint8Array(m);
      if (d.upstream?.readyState === WebSocket.OPEN) d.upstream.send(frame);
      else d.queue.push(frame);
    },
    close(ws, code, reason) {
      const up = ws.data.upstream;
      if (up && up.readyState <= WebSocket.OPEN) up.close(sendable(code), reason);
    },
  };
}
