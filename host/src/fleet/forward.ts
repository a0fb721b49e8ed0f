// Routing in a fleet: a request for a box another server runs (or for driving
// a session of one) is forwarded to that server, so every verb works through
// whichever server a client talks to. The forward goes over the servers' TLS
// listeners, pinned to the certificate the owner put in its node entry, and
// carries the caller as the fleet vouches for it: the principal, signed with
// a key every server derives from the fleet key file (HMAC-SHA256 over the
// method, path, time, a nonce and the principal). The owner checks the
// signature, the time (±60 s) and that the nonce is new, then serves the
// request as that principal; it never forwards a forwarded request again.
import { createHmac, timingSafeEqual } from "node:crypto";
import { type FleetNode, HutchError } from "@hutch/shared";
import type { Principal } from "../auth/service.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "fleet" });

export const FORWARD_HEADER = "x-hutch-fleet";
export const PRINCIPAL_HEADER = "x-hutch-fleet-principal";
/** On a request forwarded a second time (its box moved on): the server it reaches serves it or refuses it, never forwards it. */
export const HOP_HEADER = "x-hutch-fleet-hop";
const SKEW_MS = 60_000;
/** How long a node's entry (its URL and certificate) is used before it is read again. */
const NODE_CACHE_MS = 2_000;

/** The key forwards are signed with: the fleet key's master key, through HMAC under its own label. */
export function forwardKey(master: Uint8Array): Uint8Array {
  return new Uint8Array(createHmac("sha256", master).update("hutch fleet forward v1").digest());
}

const mac = (key: Uint8Array, parts: string[]) => createHmac("sha256", key).update(parts.join("\n")).digest();

/** A node's entry as forwarding needs it: where it serves, and the certificate to pin. */
export type NodeEntry = Pick<FleetNode, "name" | "listen" | "cert">;

/** What a server is told of the request it forwards. */
export interface Route {
  node: string;
  /** What the request is about, for the error when that server is gone. */
  what: string;
}

export class Forwarder {
  private readonly nonces = new Map<string, number>();
  private cache: { at: number; nodes: NodeEntry[] } | null = null;

  constructor(
    private readonly key: Uint8Array,
    /** This server's node name. */
    readonly node: string,
    private readonly listNodes: () => Promise<NodeEntry[]>,
  ) {}

  /** The headers that carry `p` to another server for this request. */
  sign(method: string, pathAndQuery: string, p: Principal): Record<string, string> {
    const principal = Buffer.from(JSON.stringify(p)).toString("base64url");
    const ts = String(Date.now());
    const nonce = crypto.randomUUID();
    const sig = mac(this.key, ["v1", this.node, ts, nonce, method, pathAndQuery, principal]).toString("base64url");
    return { [FORWARD_HEADER]: `v1.${this.node}.${ts}.${nonce}.${sig}`, [PRINCIPAL_HEADER]: principal };
  }

  /**
   * The principal a forwarded request carries, when its signature holds; an
   * unauthorized error naming what failed otherwise (never the signature).
   */
  verify(method: string, pathAndQuery: string, headers: Headers): Principal {
    const [v, from, ts, nonce, sig] = (headers.get(FORWARD_HEADER) ?? "").split(".");
    const principal = headers.get(PRINCIPAL_HEADER) ?? "";
    const bad = (why: string) =>
      new HutchError(
        "unauthorized",
        `not authenticated: a forward from the fleet ${why}`,
        "check that every server of the fleet holds the same fleet key",
      );
    if (v !== "v1" || !from || !ts || !nonce || !sig) throw bad("is malformed");
    const want = mac(this.key, ["v1", from, ts, nonce, method, pathAndQuery, principal]);
    const got = Buffer.from(sig, "base64url");
    if (got.length !== want.length || !timingSafeEqual(got, want))
      throw bad(`from "${from}" has a signature this server's fleet key does not make`);
    const now = Date.now();
    if (Math.abs(now - Number(ts)) > SKEW_MS) throw bad(`from "${from}" is older than ${SKEW_MS / 1000} s (are the clocks apart?)`);
    if (this.nonces.has(nonce)) throw bad(`from "${from}" was sent before (a replay)`);
    this.nonces.set(nonce, now);
    for (const [n, at] of this.nonces) if (now - at > 2 * SKEW_MS) this.nonces.delete(n);
    return JSON.parse(Buffer.from(principal, "base64url").toString()) as Principal;
  }

  /** Sends the request on to the server `route` names, as `p`; its answer, streamed back as it comes. */
  async http(req: Request, url: URL, p: Principal, route: Route, extra: Record<string, string> = {}): Promise<Response> {
    const to = await this.entry(route);
    const headers = new Headers(req.headers);
    headers.delete("authorization");
    headers.delete("host");
    headers.delete("content-length");
    for (const [k, v] of Object.entries(extra)) headers.set(k, v);
    for (const [k, v] of Object.entries(this.sign(req.method, url.pathname + url.search, p))) headers.set(k, v);
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
    try {
      const res = await fetch(`${to.listen}${url.pathname}${url.search}`, {
        method: req.method,
        headers,
        body,
        redirect: "manual",
        tls: { ca: to.cert, checkServerIdentity: () => undefined },
      } as RequestInit);
      return new Response(res.body, { status: res.status, headers: res.headers });
    } catch (err) {
      logger.warn("a forward failed", { to: to.name, path: url.pathname, err: String(err) });
      throw new HutchError(
        "unavailable",
        `${route.what} runs on server "${to.name}" (${to.listen}), which did not answer: ${(err as Error).message}`,
        "retry; if it stays down, its boxes wait for it to come back",
      );
    }
  }

  /** The URL and pinned certificate of a WebSocket to the server `route` names, and the headers that carry `p`. */
  async socket(url: URL, p: Principal, route: Route): Promise<{ url: string; cert: string; headers: Record<string, string> }> {
    const to = await this.entry(route);
    return {
      url: `${to.listen.replace(/^https:/, "wss:")}${url.pathname}${url.search}`,
      cert: to.cert!,
      headers: this.sign("GET", url.pathname + url.search, p),
    };
  }

  private async entry(route: Route): Promise<NodeEntry & { cert: string }> {
    const fresh = this.cache && Date.now() - this.cache.at < NODE_CACHE_MS;
    if (!fresh) this.cache = { at: Date.now(), nodes: await this.listNodes() };
    const n = this.cache!.nodes.find((x) => x.name === route.node);
    if (!n?.cert)
      throw new HutchError(
        "unavailable",
        `${route.what} runs on server "${route.node}", which is not live in the fleet`,
        "wait for it to come back (hutch cluster nodes lists the live ones)",
      );
    return n as NodeEntry & { cert: string };
  }
}
