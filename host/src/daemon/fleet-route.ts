// Which requests this server hands to another server of its fleet: those for
// a box another server runs (every box route, its tool stream included), and
// those that drive a session of such a box (input, attach, interrupt, the
// driver slot, close, fork), which only the box's server can carry out.
// Reading and annotating a session need no forward: every server has the
// fleet's session log (fleet/README.md). A request another server forwarded
// here is never forwarded again.
import type { FleetBox } from "@hutch/shared";
import type { Server } from "bun";
import type { Principal } from "../auth/service.ts";
import type { BoxService } from "../box/service.ts";
import { FORWARD_HEADER, type Forwarder, type Route } from "../fleet/forward.ts";
import type { SessionLog } from "../store/types.ts";
import type { ProxySocketData } from "./proxy-socket.ts";

const BOX = /^\/v1\/boxes\/([^/]+)(\/.*)?$/;
const DRIVE = /^\/v1\/sessions\/(ses_[0-9a-z]{20})\/(input|interrupt|attach|close|fork|driver\/[a-z]+)$/;

export interface FleetRouting {
  directory: { find(ref: string): FleetBox | undefined };
  forwarder: Forwarder;
}

/** The server a request belongs on, when it is another one. */
export function routeOf(url: URL, boxes: BoxService, sessions: SessionLog, fleet: FleetRouting): Route | undefined {
  const box = BOX.exec(url.pathname);
  if (box) {
    const ref = decodeURIComponent(box[1]!);
    if (boxes.find(ref)) return undefined;
    const e = fleet.directory.find(ref);
    return e ? { node: e.node, what: `box "${ref}"` } : undefined;
  }
  const drive = DRIVE.exec(url.pathname);
  if (drive) {
    const row = sessions.get(drive[1]!);
    if (!row || boxes.byId(row.box_id)) return undefined;
    const e = fleet.directory.find(row.box_id);
    return e ? { node: e.node, what: `session ${row.id}'s box "${e.box.name}"` } : undefined;
  }
  return undefined;
}

/**
 * Forwards the request when it belongs on another server: an HTTP answer,
 * "upgraded" for a WebSocket now proxied there, or undefined to serve it here.
 */
export async function forwardElsewhere(
  req: Request,
  srv: Server<unknown>,
  p: Principal,
  deps: { boxes: BoxService; sessions: SessionLog; fleet: FleetRouting },
): Promise<Response | "upgraded" | undefined> {
  if (req.headers.has(FORWARD_HEADER)) return undefined;
  const url = new URL(req.url);
  const route = routeOf(url, deps.boxes, deps.sessions, deps.fleet);
  if (!route) return undefined;
  if (req.headers.get("upgrade")?.toLowerCase() === "websocket") {
    const target = await deps.fleet.forwarder.socket(url, p, route);
    const data: ProxySocketData = { kind: "proxy", target, queue: [], ...(p.token ? { token: p.token } : {}) };
    return (srv as Server<ProxySocketData>).upgrade(req, { data }) ? "upgraded" : undefined;
  }
  return deps.fleet.forwarder.http(req, url, p, route);
}
