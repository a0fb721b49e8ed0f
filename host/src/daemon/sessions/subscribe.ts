// GET /v1/sessions/:id/subscribe?from=SEQ (WebSocket): replay from the log,
// then tail live events, in seq order with no gap and no repeat. Each text
// message holds one or more events, one JSON object per line; a CaughtUpLine
// marks the end of the replay (the protocol's shapes are in shared/src/api.ts).
//
// A consumer too slow for its bounded buffer is closed with
// SUBSCRIBE_CLOSE_SLOW and the reason {"resumeFrom":N}: every event before N
// was handed to the socket (and arrives before the close), so reconnecting
// from N loses and repeats nothing.
import type { Server, ServerWebSocket, WebSocketHandler } from "bun";
import { API_LIMITS, HutchError, ID_BODY, SUBSCRIBE_CLOSE_SLOW, type Actor, type CaughtUpLine, type SlowCloseReason } from "@hutch/shared";
import { actorFrom, principalOf, type Identify } from "../actor.ts";
import type { SessionService } from "../../session/service.ts";
import type { SessionLog } from "../../store/types.ts";

const PAGE = 2000;
/** Bytes queued in the socket beyond which replay pauses until drain. */
const REPLAY_HIGH_WATER = 1024 * 1024;
/** Bytes queued beyond which a live consumer is too slow and is closed. */
const LIVE_LIMIT = 8 * 1024 * 1024;
/** Live events held while a replay catches up, beyond which the consumer is closed. */
const PENDING_LIMIT = 100_000;
const PING_MS = 15_000;

export interface SubscribeData {
  kind: "subscribe";
  session: string;
  actor: Actor;
  next: number;
  replaying: boolean;
  pending: { seq: number; json: string }[];
  unsubscribe?: () => void;
  ping?: ReturnType<typeof setInterval>;
  done: boolean;
  /** The token the socket was opened with (server mode): revoking it closes the socket. */
  token?: string;
  /** Ends this watcher's hold on the session's box (a log view keeps it awake). */
  release?: () => void;
}

export function subscribeData(session: string, actor: Actor, from: number): SubscribeData {
  return { kind: "subscribe", session, actor, next: Math.max(1, from), replaying: true, pending: [], done: false };
}

const SUBSCRIBE_PATH = new RegExp(`^/v1/sessions/(ses_${ID_BODY})/subscribe$`);

/**
 * Upgrades a subscribe request. Returns undefined when the request is not one,
 * true when upgraded, or an error Response (unknown session, not allowed).
 * In a fleet, this server's replica first catches up with the session as the
 * fleet's log has it (one made through another server a moment ago is found).
 */
export async function upgradeSubscribe(
  req: Request,
  server: Server<SubscribeData>,
  sessions: SessionService,
  identify: Identify,
): Promise<true | Response | undefined> {
  const url = new URL(req.url);
  const m = SUBSCRIBE_PATH.exec(url.pathname);
  if (!m || req.headers.get("upgrade")?.toLowerCase() !== "websocket") return undefined;
  try {
    if (sessions.writer.shared) await sessions.writer.fresh();
    const actor = actorFrom(req, identify);
    sessions.row(m[1]!, actor);
    const from = Number(url.searchParams.get("from") ?? "1");
    if (!Number.isInteger(from) || from < 1 || from > API_LIMITS.whole)
      throw new HutchError("invalid", `from: Expected a whole number from 1 to ${API_LIMITS.whole}`, "e.g. ?from=1");
    const token = principalOf(req)?.token;
    if (server.upgrade(req, { data: { ...subscribeData(m[1]!, actor, from), ...(token ? { token } : {}) } })) return true;
    throw new HutchError("invalid", "could not upgrade to WebSocket", "connect with a WebSocket client");
  } catch (err) {
    const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
    return Response.json(e.toBody(), { status: e.status });
  }
}

/** `hold`: a watcher of a session's log holds its box awake as a client (box/idle.ts) while it is connected. */
export function subscribeSocket(
  sessions: SessionService,
  store: SessionLog,
  hold: (boxId: string) => () => void = () => () => {},
): WebSocketHandler<SubscribeData> {
  const closeSlow = (ws: ServerWebSocket<SubscribeData>) => {
    if (ws.data.done) return;
    ws.data.done = true;
    ws.data.unsubscribe?.();
    ws.close(SUBSCRIBE_CLOSE_SLOW, JSON.stringify({ resumeFrom: ws.data.next } satisfies SlowCloseReason));
  };

  const pump = (ws: ServerWebSocket<SubscribeData>) => {
    const d = ws.data;
    while (d.replaying && !d.done) {
      if (ws.getBufferedAmount() > REPLAY_HIGH_WATER) return; // drain() resumes
      const page = store.readText(d.session, d.next, PAGE);
      if (page.count === 0) {
        // Caught up with the log: hand over to the live events held meanwhile.
        d.replaying = false;
        const held = d.pending.filter((e) => e.seq >= d.next);
        d.pending = [];
        if (held.length) sendLive(ws, held);
        if (!d.done) ws.send(JSON.stringify({ type: "caught-up", seq: d.next - 1 } satisfies CaughtUpLine));
        return;
      }
      ws.send(page.text);
      d.next = page.last + 1;
    }
  };

  const sendLive = (ws: ServerWebSocket<SubscribeData>, events: { seq: number; json: string }[]) => {
    const d = ws.data;
    const fresh = events.filter((e) => e.seq >= d.next);
    if (fresh.length === 0) return;
    ws.send(fresh.map((e) => e.json).join("\n"));
    d.next = fresh[fresh.length - 1]!.seq + 1;
    if (ws.getBufferedAmount() > LIVE_LIMIT) closeSlow(ws);
  };

  return {
    // Above Bun's default (16 MiB) a send is dropped, not queued: our own limits above must bite first.
    backpressureLimit: 64 * 1024 * 1024,
    open(ws) {
      const d = ws.data;
      // Listen before replaying, so nothing committed during the replay is missed.
      d.unsubscribe = sessions.bus.subscribe(d.session, (seq, json) => {
        if (d.done) return;
        if (d.replaying) {
          d.pending.push({ seq, json });
          if (d.pending.length > PENDING_LIMIT) closeSlow(ws);
          return;
        }
        sendLive(ws, [{ seq, json }]);
      });
      d.ping = setInterval(() => ws.ping(), PING_MS);
      const row = store.get(d.session);
      if (row?.state === "open") d.release = hold(row.box_id);
      // In a fleet, the upgrade waited for this server's replica to have what the fleet's log acknowledged (upgradeSubscribe).
      pump(ws);
    },
    drain(ws) {
      pump(ws);
    },
    message() {
      // Subscribers only listen.
    },
    close(ws) {
      ws.data.done = true;
      ws.data.unsubscribe?.();
      ws.data.release?.();
      clearInterval(ws.data.ping);
    },
  };
}
