// The daemon on TLS TCP (`hutch serve --listen`): the same app and sockets as
// the unix socket, behind one gate. Every request and every WebSocket upgrade
// carries a token (401 without one); the principal it names is recorded for
// the app (actor.ts) and checked against the path (access.ts) before either
// upgrade, which bypass Elysia; the app charges the boxes it makes to the
// token (creations.ts). Each token's open sockets are kept, so a
// revocation closes them in the same tick. Failures are logged with the
// address and the reason, never the token.
import { constants } from "node:crypto";
import type { Server, ServerWebSocket, WebSocketHandler } from "bun";
import { API_LIMITS, HutchError, WS_CLOSE_DENIED, WS_CLOSE_UNAUTHORIZED } from "@hutch/shared";
import type { AuthService, Principal } from "../auth/service.ts";
import type { ServeCert } from "../auth/cert.ts";
import { log } from "../log.ts";
import { checkAccess, type AccessDeps } from "./access.ts";
import { setPrincipal } from "./actor.ts";
import { FORWARD_HEADER } from "../fleet/forward.ts";
import type { Data } from "./sockets.ts";
import type { StreamSocketData } from "./stream/index.ts";

const logger = log.create({ service: "serve" });

/** How long a TCP connection may sit with nothing sent (Bun's largest); WebSockets keep alive with pings. */
const IDLE_TIMEOUT_S = 255;
/** How often open sockets are checked for tokens that expired while they were open. */
const EXPIRY_SWEEP_MS = 5_000;
/** TLS 1.3 only, as incus serves it: every client hutch has (Bun's fetch, the extension's Node) speaks it. */
const TLS13_ONLY = constants.SSL_OP_NO_TLSv1 | constants.SSL_OP_NO_TLSv1_1 | constants.SSL_OP_NO_TLSv1_2;

export interface RemoteListener {
  server: Server<Data>;
  url: string;
  stop(): Promise<void>;
}

export interface RemoteDeps extends AccessDeps {
  auth: AuthService;
  /** What the unix socket does with a request: the two upgrades, then the app. */
  handle(req: Request, srv: Server<Data>): Response | undefined | Promise<Response | undefined>;
  websocket: (tracker: { open(ws: ServerWebSocket<Data>): void; close(ws: ServerWebSocket<Data>): void }) => WebSocketHandler<Data>;
  /** Ends the long HTTP responses (the change feed) a token holds open, when it is revoked or expires. */
  endStreams?: (tokenId: string) => void;
  /**
   * In a fleet: the caller of a request another server forwarded here (its
   * signature checked; fleet/forward.ts), and whether a request is one this
   * server forwards on (the box's own server checks its access then).
   */
  fleet?: { verify(method: string, pathAndQuery: string, headers: Headers): Principal; routes(url: URL): boolean };
}

export function listenRemote(deps: RemoteDeps, at: { hostname: string; port: number }, cert: ServeCert): RemoteListener {
  const open = new Map<string, Set<ServerWebSocket<Data>>>();
  const closeToken = (id: string, why: string) => {
    for (const ws of open.get(id) ?? []) ws.close(WS_CLOSE_UNAUTHORIZED, JSON.stringify({ code: "unauthorized", message: why }));
    open.delete(id);
    deps.endStreams?.(id);
  };
  const offRevoke = deps.auth.onRevoke((id) => closeToken(id, `token ${id} was revoked`));
  // A share that narrows or ends closes what its user has open on the box: every tool stream (a read share
  // opens none), and when it ended, the session feeds too.
  const offNarrowed = deps.auth.onNarrowed((boxId, user, now) => {
    const why = JSON.stringify({ code: "denied", message: `your share of box ${boxId} was ${now ? `narrowed to ${now}` : "withdrawn"}` });
    for (const [token, set] of open) {
      if (deps.auth.store.token(token)?.user !== user) continue;
      for (const ws of set) if (onBox(deps, ws.data, boxId, now === null)) ws.close(WS_CLOSE_DENIED, why);
    }
  });
  // Tokens seen on this listener since it started: an expired one's feeds end too, not only its sockets.
  const seen = new Set<string>();
  const sweep = setInterval(() => {
    for (const id of seen)
      if (!deps.auth.stillValid(id)) {
        seen.delete(id);
        closeToken(id, `token ${id} expired`);
      }
  }, EXPIRY_SWEEP_MS);
  const tracker = {
    open(ws: ServerWebSocket<Data>) {
      const id = ws.data.token;
      if (!id) return;
      // Revoked between the upgrade and now: never let it through.
      if (!deps.auth.stillValid(id))
        return void ws.close(WS_CLOSE_UNAUTHORIZED, JSON.stringify({ code: "unauthorized", message: "token revoked" }));
      const set = open.get(id) ?? new Set();
      set.add(ws);
      open.set(id, set);
    },
    close(ws: ServerWebSocket<Data>) {
      const id = ws.data.token;
      if (id) open.get(id)?.delete(ws);
    },
  };
  const refuse = (e: HutchError) =>
    Response.json(e.toBody(), {
      status: e.status,
      headers: e.code === "unauthorized" ? { "www-authenticate": 'Bearer realm="hutch"' } : {},
    });

  const server = Bun.serve<Data>({
    hostname: at.hostname,
    port: at.port,
    tls: { cert: cert.cert, key: cert.key, secureOptions: TLS13_ONLY },
    idleTimeout: IDLE_TIMEOUT_S,
    maxRequestBodySize: API_LIMITS.bodyBytes,
    fetch(req, srv) {
      const url = new URL(req.url);
      let p: Principal;
      try {
        if (deps.fleet && req.headers.has(FORWARD_HEADER)) {
          p = deps.fleet.verify(req.method, url.pathname + url.search, req.headers);
          if (p.token && !deps.auth.stillValid(p.token))
            throw new HutchError(
              "unauthorized",
              `not authenticated: token ${p.token} was revoked or expired`,
              "ask the server's admin for a new one",
            );
        } else p = deps.auth.authenticate(req.headers.get("authorization"));
      } catch (err) {
        const e = err instanceof HutchError ? err : new HutchError("unauthorized", "not authenticated");
        logger.warn("authentication failed", {
          from: srv.requestIP(req)?.address,
          method: req.method,
          path: url.pathname,
          reason: e.message,
        });
        return refuse(e);
      }
      setPrincipal(req, p);
      if (p.token) seen.add(p.token);
      try {
        // The app checks again for everything it serves; the upgrades are answered before it.
        if (req.headers.get("upgrade")?.toLowerCase() === "websocket" && !deps.fleet?.routes(url)) checkAccess(deps, p, req.method, url);
      } catch (err) {
        if (err instanceof HutchError) return refuse(err);
        throw err;
      }
      return deps.handle(req, srv);
    },
    websocket: deps.websocket(tracker),
    error(err) {
      logger.warn("request failed", { error: err.message });
      return Response.json(new HutchError("failed", err.message).toBody(), { status: 500 });
    },
  });
  const host = at.hostname.includes(":") ? `[${at.hostname}]` : at.hostname;
  const url = `https://${host}:${server.port}`;
  return {
    server,
    url,
    async stop() {
      offRevoke();
      offNarrowed();
      clearInterval(sweep);
      await Promise.race([server.stop(), Bun.sleep(1000)]);
      await server.stop(true);
    },
  };
}

/** Whether an open socket reaches a box: a tool stream to it or to one of its sessions, or (with feeds) a session feed of it. */
function onBox(deps: AccessDeps, data: Data, boxId: string, feeds: boolean): boolean {
  if ("kind" in data && data.kind === "subscribe") return feeds && deps.sessionStore.get(data.session)?.box_id === boxId;
  const stream = data as StreamSocketData;
  if (stream.session && deps.sessionStore.get(stream.session.id)?.box_id === boxId) return true;
  return deps.boxes.find(stream.ref)?.id === boxId;
}
