// A WebSocket forwarded to the fleet server that runs its box (fleet/
// forward.ts): what the client sends goes on to that server's socket, and
// what it answers comes back, frame for frame, until either side closes. The
// client's frames wait in order while the upstream socket opens.
//
// An upstream that fails before it opens is tried again, a bounded while,
// with a freshly signed request: nothing of the client's has reached it yet,
// and the moments after a move (the box waking on its new server) are when
// that happens. A 4xx answer to the upgrade is that server's refusal and is
// final; once the upstream has opened, a failure closes the client's socket.
import type { ServerWebSocket, WebSocketHandler } from "bun";
import { log } from "../log.ts";

const logger = log.create({ service: "fleet" });

/** Where the upstream socket goes: its URL, the pinned certificate and the headers that carry the caller (signed anew per attempt). */
export interface ProxyTarget {
  url: string;
  cert: string;
  headers: Record<string, string>;
}

export interface ProxySocketData {
  kind: "proxy";
  /** The upstream socket's target, asked again for each attempt. */
  target: () => Promise<ProxyTarget>;
  /** The token the client's socket was opened with (server mode): revoking it closes the socket. */
  token?: string;
  upstream?: WebSocket;
  queue: (string | Uint8Array)[];
  /** Set once the client's socket closed: no further attempt is made. */
  closed?: boolean;
}

/** How long, and how many times, an upstream that did not open is tried again. */
const RETRY_FOR_MS = 10_000;
const RETRY_DELAYS_MS = [100, 250, 500, 1000, 2000, 3000];

/** A close code a socket may send (1005, 1006 and 1015 are only ever reported). */
const sendable = (code: number) =>
  code === 1000 || (code >= 3000 && code < 5000) || (code >= 1001 && code <= 1014 && code !== 1005 && code !== 1006) ? code : 1000;

const unavailable = (why: string) => JSON.stringify({ code: "unavailable", message: `the server that runs the box ${why}` });

function connect(ws: ServerWebSocket<ProxySocketData>, target: ProxyTarget, attempt: number, since: number): void {
  const d = ws.data;
  const up = new WebSocket(target.url, {
    headers: target.headers,
    tls: { ca: target.cert, checkServerIdentity: () => undefined },
  } as unknown as string[]);
  up.binaryType = "arraybuffer";
  d.upstream = up;
  let opened = false;
  let failed = false;
  const notOpened = (why: string, refused = false) => {
    if (failed || d.closed) return;
    failed = true;
    const delay = refused ? undefined : RETRY_DELAYS_MS[attempt];
    if (delay === undefined || Date.now() - since + delay > RETRY_FOR_MS) {
      ws.close(1011, unavailable(why));
      return;
    }
    logger.info("a forwarded stream's upstream did not open; trying again", { url: target.url, why, attempt: attempt + 1 });
    setTimeout(() => {
      if (d.closed) return;
      d.target().then(
        (t) => connect(ws, t, attempt + 1, since),
        (err: unknown) => ws.close(1011, unavailable(`is not reachable: ${err instanceof Error ? err.message : String(err)}`)),
      );
    }, delay);
  };
  up.onopen = () => {
    opened = true;
    for (const m of d.queue.splice(0)) up.send(m);
  };
  up.onmessage = (e) => {
    ws.send(typeof e.data === "string" ? e.data : new Uint8Array(e.data as ArrayBuffer));
  };
  up.onclose = (e) => {
    if (!opened) notOpened(`refused the stream (${e.code}${e.reason ? `: ${e.reason}` : ""})`);
    else ws.close(sendable(e.code), e.reason);
  };
  up.onerror = (e) => {
    // A 4xx answer to the upgrade is that server's refusal (a box that is not the caller's): final, not tried again.
    const status = /Expected 101 status code: (\d{3})/.exec((e as ErrorEvent).message ?? "")?.[1];
    if (!opened) notOpened(status ? `answered ${status}` : "did not open the stream", status !== undefined && Number(status) < 500);
    else ws.close(1011, unavailable("closed the stream"));
  };
}

export function proxySocket(): WebSocketHandler<ProxySocketData> {
  return {
    open(ws) {
      const d = ws.data;
      d.target().then(
        (t) => connect(ws, t, 0, Date.now()),
        (err: unknown) => ws.close(1011, unavailable(`is not reachable: ${err instanceof Error ? err.message : String(err)}`)),
      );
    },
    message(ws: ServerWebSocket<ProxySocketData>, m) {
      const d = ws.data;
      const frame = typeof m === "string" ? m : new Uint8Array(m);
      // Straight on only when nothing waits before it: frames keep the client's order.
      if (d.queue.length === 0 && d.upstream?.readyState === WebSocket.OPEN) d.upstream.send(frame);
      else d.queue.push(frame);
    },
    close(ws, code, reason) {
      ws.data.closed = true;
      const up = ws.data.upstream;
      if (up && up.readyState <= WebSocket.OPEN) up.close(sendable(code), reason);
    },
  };
}
