// Replay-then-tail from the CLI's side: one WebSocket subscription that
// resumes by itself (after a slow-consumer close, or a daemon restart) from
// the next seq it has not delivered, so callers see every event once, in order.
import { HutchError } from "@hutch/shared/base";
import { CaughtUpLine, check, firstError, SessionEvent, SUBSCRIBE_CLOSE_SLOW } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";

export interface SubscribeHandlers {
  event(e: SessionEvent): void | Promise<void>;
  /** The replay reached the end of the log; live events follow. */
  caughtUp?(seq: number): void;
}

export interface Subscription {
  /** Resolves when closed by close(); rejects on an error that retrying cannot fix. */
  done: Promise<void>;
  close(): void;
  /** The next seq not yet delivered. */
  readonly next: number;
}

const RECONNECT_FOR_MS = 30_000;

export function subscribe(
  daemon: DaemonClient,
  session: string,
  from: number,
  h: SubscribeHandlers,
  opts: { reconnectForMs?: number } = {},
): Subscription {
  const reconnectFor = opts.reconnectForMs ?? RECONNECT_FOR_MS;
  let next = from;
  let ws: WebSocket | null = null;
  let stopped = false;
  let lostSince: number | null = null;
  let chain: Promise<void> = Promise.resolve();
  let finish!: () => void;
  let fail!: (err: Error) => void;
  const done = new Promise<void>((res, rej) => {
    finish = res;
    fail = rej;
  });

  const deliver = (line: string) => {
    const msg: unknown = JSON.parse(line);
    if (check(CaughtUpLine, msg)) return h.caughtUp?.(msg.seq);
    // Other lines with a type are the protocol's, and this client knows none; a line without one is an event.
    if (typeof msg === "object" && msg !== null && "type" in msg) return;
    if (!check(SessionEvent, msg))
      throw new HutchError(
        "failed",
        `the daemon sent an event line that is not an event (${firstError(SessionEvent, msg)})`,
        "see: hutch doctor",
      );
    if (msg.seq < next) return; // already delivered before a reconnect
    if (msg.seq > next) throw new HutchError("failed", `event stream skipped from seq ${next} to ${msg.seq}`);
    next = msg.seq + 1;
    return h.event(msg);
  };

  const connect = () => {
    if (stopped) return;
    const sock = daemon.transport.websocket(`/v1/sessions/${encodeURIComponent(session)}/subscribe?from=${next}`, daemon.headers);
    ws = sock;
    sock.onopen = () => {
      lostSince = null;
    };
    sock.onmessage = (e) => {
      const text = String(e.data);
      chain = chain.then(async () => {
        for (const line of text.split("\n")) if (line) await deliver(line);
      });
      chain.catch((err) => {
        stopped = true;
        sock.close();
        fail(err);
      });
    };
    sock.onclose = (e) => {
      if (stopped) return finish();
      // Too slow: the reason says where to resume, and our `next` agrees once the chain drains.
      void chain.then(async () => {
        if (e.code === SUBSCRIBE_CLOSE_SLOW) return connect();
        if (e.code >= 4400 && e.code < 4500) return fail(new HutchError("failed", e.reason || "subscription refused"));
        lostSince ??= Date.now();
        if (Date.now() - lostSince > reconnectFor) {
          return fail(new HutchError("unavailable", "lost the daemon and it did not come back", "see: hutch doctor"));
        }
        await Bun.sleep(100);
        // A refused connection may mean the daemon is gone: a request starts one.
        await daemon.request("GET", "/v1/health").catch(() => undefined);
        connect();
      });
    };
  };

  // Check the session exists (and we may see it) before subscribing: a clear error beats a refused upgrade.
  void daemon
    .request("GET", `/v1/sessions/${encodeURIComponent(session)}`)
    .then(connect)
    .catch((err) => fail(err));

  return {
    done,
    close() {
      stopped = true;
      ws?.close();
      finish();
    },
    get next() {
      return next;
    },
  };
}
