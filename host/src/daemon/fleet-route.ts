// Which requests this server hands to another server of its fleet: those for
// a box another server runs (every box route, its tool stream included, and
// the routes whose body names the box: a session, a snapshot or a restore of
// it, a dispatch from it, a schedule on it), those that drive a session of
// such a box (input, attach, interrupt, the driver slot, close, fork), which
// only the box's server can carry out, and a new box that placement puts on
// another server.
// Reading and annotating a session need no forward: every server has the
// fleet's session log (fleet/README.md). A request another server forwarded
// here is never forwarded again.
import type { FleetBox, FleetNode } from "@hutch/shared";
import { place } from "../fleet/place.ts";
import type { Server } from "bun";
import type { Principal } from "../auth/service.ts";
import type { BoxService } from "../box/service.ts";
import { FORWARD_HEADER, HOP_HEADER, type Forwarder, type Route } from "../fleet/forward.ts";
import type { SessionLog } from "../store/types.ts";
import type { ProxySocketData, ProxyTarget } from "./proxy-socket.ts";

const BOX = /^\/v1\/boxes\/([^/]+)(\/.*)?$/;
const DRIVE = /^\/v1\/sessions\/(ses_[0-9a-z]{20})\/(input|interrupt|attach|close|fork|driver\/[a-z]+)$/;
/** Routes whose JSON body names the box they act on (`box`): a session, a snapshot or a restore, a dispatch, a schedule. */
const BODY_BOX = /^\/v1\/(sessions|snapshots|snapshots\/restore|dispatches|schedules)\/?$/;

/** The fleet's routes that act on a box (its move) or on a server (its drain): they run on that box's or that server's server. */
const FLEET_BOX = /^\/v1\/fleet\/boxes\/([^/]+)\/move$/;
const FLEET_NODE = /^\/v1\/fleet\/nodes\/([^/]+)\/drain$/;

export interface FleetRouting {
  directory: { find(ref: string): FleetBox | undefined; all(): FleetBox[]; fresh(): Promise<void> };
  forwarder: Forwarder;
  /** The live servers, with what placement weighs. */
  nodes(): Promise<FleetNode[]>;
  /** The cordoned servers: placement skips them. */
  cordoned?(): Promise<string[]>;
  /** While a box is moving away from here or being made here: resolves when a request for it may be routed. */
  settled?(ref: string): Promise<void> | undefined;
}

/** The server a request belongs on, when it is another one. */
export function routeOf(url: URL, boxes: BoxService, sessions: SessionLog, fleet: FleetRouting): Route | undefined {
  const node = FLEET_NODE.exec(url.pathname);
  if (node) {
    const name = decodeURIComponent(node[1]!);
    return name === fleet.forwarder.node ? undefined : { node: name, what: `server ${name}` };
  }
  const box = BOX.exec(url.pathname) ?? FLEET_BOX.exec(url.pathname);
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
  // A request another server forwarded here goes on once more at most: its box moved on meanwhile.
  if (req.headers.has(HOP_HEADER)) return undefined;
  const forwarded = req.headers.has(FORWARD_HEADER);
  const url = new URL(req.url);
  const ref = boxRef(url);
  if (ref !== undefined) {
    await deps.fleet.settled?.(ref);
    // A box another server made (or took over) a moment ago may not be in this server's view of the directory yet.
    if (!deps.boxes.find(ref) && !deps.fleet.directory.find(ref)) await deps.fleet.directory.fresh();
  }
  if (forwarded) {
    const route = ref !== undefined ? routeOf(url, deps.boxes, deps.sessions, deps.fleet) : undefined;
    if (!route) return undefined;
    return hop(req, srv, p, deps, url, route);
  }
  if (req.method === "POST" && (url.pathname === "/v1/boxes" || url.pathname === "/v1/boxes/")) return placeNew(req, url, p, deps.fleet);
  if (req.method === "POST" && BODY_BOX.test(url.pathname)) {
    const ref = await boxOfBody(req);
    const e = ref && !deps.boxes.find(ref) ? deps.fleet.directory.find(ref) : undefined;
    if (e) return deps.fleet.forwarder.http(req, url, p, { node: e.node, what: `box "${ref}"` });
    return undefined;
  }
  const route = routeOf(url, deps.boxes, deps.sessions, deps.fleet);
  if (!route) return undefined;
  return hop(req, srv, p, deps, url, route);
}

/** Sends a request on to `route`'s server: HTTP with its answer streamed back, or a WebSocket proxied. */
async function hop(
  req: Request,
  srv: Server<unknown>,
  p: Principal,
  deps: { fleet: FleetRouting },
  url: URL,
  route: Route,
): Promise<Response | "upgraded" | undefined> {
  const again: Record<string, string> = req.headers.has(FORWARD_HEADER) ? { [HOP_HEADER]: "1" } : {};
  if (req.headers.get("upgrade")?.toLowerCase() === "websocket") {
    // The first target is asked here, so a server not live in the fleet is refused before the upgrade; later attempts sign anew.
    const sign = async () => {
      const t = await deps.fleet.forwarder.socket(url, p, route);
      return { ...t, headers: { ...t.headers, ...again } };
    };
    let first: ProxyTarget | undefined = await sign();
    const data: ProxySocketData = {
      kind: "proxy",
      target: () => {
        const t = first;
        first = undefined;
        return t ? Promise.resolve(t) : sign();
      },
      queue: [],
      ...(p.token ? { token: p.token } : {}),
    };
    return (srv as Server<ProxySocketData>).upgrade(req, { data }) ? "upgraded" : undefined;
  }
  return deps.fleet.forwarder.http(req, url, p, route, again);
}

/** The box a box route (or a move) names. */
function boxRef(url: URL): string | undefined {
  const m = BOX.exec(url.pathname) ?? FLEET_BOX.exec(url.pathname);
  return m ? decodeURIComponent(m[1]!) : undefined;
}

/** A new box: made here, or forwarded to the server placement picks (fleet/place.ts). A body that does not parse is left to the handler to refuse. */
async function placeNew(req: Request, url: URL, p: Principal, fleet: FleetRouting): Promise<Response | undefined> {
  let body: { name?: unknown; engine?: unknown; memoryMiB?: unknown; node?: unknown; on?: unknown };
  try {
    body = JSON.parse(await req.clone().text()) as typeof body;
  } catch {
    return undefined;
  }
  if (typeof body !== "object" || body === null) return undefined;
  await fleet.directory.fresh();
  const cordoned = new Set((await fleet.cordoned?.()) ?? []);
  const open = (await fleet.nodes()).filter((n) => !cordoned.has(n.name));
  const node = place(open, fleet.directory.all(), {
    engine: typeof body.engine === "string" ? body.engine : "process",
    memoryMiB: typeof body.memoryMiB === "number" ? body.memoryMiB : 512,
    ...(typeof body.node === "string" ? { node: body.node } : {}),
    ...(body.on && typeof body.on === "object" ? { on: body.on as Record<string, string> } : {}),
  });
  if (node === fleet.forwarder.node) return undefined;
  return fleet.forwarder.http(req, url, p, { node, what: `box "${String(body.name)}"` });
}

/** The box a JSON body names (`box`), if it names one. */
async function boxOfBody(req: Request): Promise<string | undefined> {
  try {
    const body = JSON.parse(await req.clone().text()) as { box?: unknown } | null;
    return typeof body?.box === "string" ? body.box : undefined;
  } catch {
    return undefined;
  }
}
