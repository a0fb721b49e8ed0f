// `hutch serve --e2b HOST:PORT`: the E2B API on its own TLS listener, with the
// server's certificate. One address serves all three parts, told apart as
// the SDK addresses them:
//   - a sandbox by host name, `PORT-SANDBOXID.DOMAIN` (E2B_DOMAIN and
//     wildcard DNS), or by the `E2b-Sandbox-Id` and `E2b-Sandbox-Port`
//     headers the SDK sends to E2B_SANDBOX_URL: port 49983 is envd, checked
//     against the sandbox's X-Access-Token; any other is the box's own port,
//     reachable by whoever knows the sandbox's id, as on E2B;
//   - anything else is the control API, whose X-API-KEY is a hutch token.
// Failures are logged with the address and the reason, never a token.
import { constants } from "node:crypto";
import type { Server } from "bun";
import { check, decodeJoin, E2B_ENVD_PORT, HutchError, JoinToken } from "@hutch/shared";
import type { AuthService } from "../../auth/service.ts";
import type { ServeCert } from "../../auth/cert.ts";
import type { SandboxService } from "../../e2b/sandboxes.ts";
import { log } from "../../log.ts";
import type { CreationGate } from "../creations.ts";
import { e2bError, serveControl } from "./control.ts";
import { envdRefusal, serveEnvd } from "./envd.ts";

const logger = log.create({ service: "e2b" });
const TLS13_ONLY = constants.SSL_OP_NO_TLSv1 | constants.SSL_OP_NO_TLSv1_1 | constants.SSL_OP_NO_TLSv1_2;
/** A write of 10 MiB and more goes through /files; the SDK's largest request. */
const MAX_BODY = 1024 * 1024 * 1024;
const HOST = /^(\d{1,5})-([a-z0-9]{20})\./;
/** Headers that address the sandbox and are not the box program's to see. */
const HOP = ["host", "e2b-sandbox-id", "e2b-sandbox-port", "x-access-token", "connection", "keep-alive", "transfer-encoding"];

export interface E2bListener {
  url: string;
  stop(): Promise<void>;
}

/**
 * The hutch token an E2B_API_KEY carries: the token itself, or the join
 * string `hutch token create` prints (so `E2B_API_KEY=$(hutch token create
 * --user alice)` works). The token inside is checked as any token is.
 */
export function apiKey(key: string): string {
  if (key.startsWith("hutch_")) return key;
  const join = decodeJoin(key);
  return check(JoinToken, join) ? join.token : key;
}

/** Which sandbox and port a request addresses, or null for the control API. */
export function addressOf(req: Request): { id: string; port: number } | null {
  const host = HOST.exec(req.headers.get("host") ?? "");
  if (host) return { id: host[2]!, port: Number(host[1]) };
  const id = req.headers.get("e2b-sandbox-id");
  if (id === null) return null;
  return { id, port: Number(req.headers.get("e2b-sandbox-port") ?? E2B_ENVD_PORT) };
}

async function toPort(service: SandboxService, id: string, port: number, req: Request): Promise<Response> {
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new HutchError("invalid", `port ${port}: 1 to 65535`, "name a port the box listens on");
  const sb = service.byId(id);
  service.channel(sb);
  const socket = await sb.ports.socket(port);
  const url = new URL(req.url);
  const headers = new Headers(req.headers);
  for (const h of HOP) headers.delete(h);
  try {
    const res = await fetch(`http://localhost:${port}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      ...(req.body ? { body: req.body, duplex: "half" } : {}),
      redirect: "manual",
      unix: socket,
      decompress: false,
    } as RequestInit);
    return new Response(res.body, { status: res.status, headers: res.headers });
  } catch {
    return Response.json(
      { code: 502, message: `The sandbox is running but port ${port} is not open`, sandboxId: id, port },
      { status: 502 },
    );
  }
}

export function listenE2b(
  deps: { auth: AuthService; sandboxes: SandboxService; creations: CreationGate },
  at: { hostname: string; port: number },
  cert: ServeCert,
): E2bListener {
  const server: Server<undefined> = Bun.serve({
    hostname: at.hostname,
    port: at.port,
    tls: { cert: cert.cert, key: cert.key, secureOptions: TLS13_ONLY },
    idleTimeout: 255,
    maxRequestBodySize: MAX_BODY,
    async fetch(req, srv) {
      const where = addressOf(req);
      const from = srv.requestIP(req)?.address;
      if (where) {
        try {
          if (where.port !== E2B_ENVD_PORT) return await toPort(deps.sandboxes, where.id, where.port, req);
          const sb = deps.sandboxes.envd(where.id, req.headers.get("x-access-token"));
          return await serveEnvd(deps.sandboxes, sb, req);
        } catch (err) {
          logger.warn("sandbox request refused", { from, path: new URL(req.url).pathname, reason: (err as Error).message });
          return envdRefusal(req, err);
        }
      }
      const key = req.headers.get("x-api-key");
      const bearer = req.headers.get("authorization");
      try {
        const p = deps.auth.authenticate(key !== null ? `Bearer ${apiKey(key)}` : bearer);
        // A sandbox is a box: its creation is charged to the token, as `hutch box create` is.
        return await deps.creations.as(p, () => serveControl(deps.sandboxes, p, req));
      } catch (err) {
        logger.warn("E2B API request refused", {
          from,
          method: req.method,
          path: new URL(req.url).pathname,
          reason: (err as Error).message,
        });
        return e2bError(err);
      }
    },
    error(err) {
      logger.warn("E2B request failed", { error: err.message });
      return Response.json({ code: 500, message: err.message }, { status: 500 });
    },
  });
  const host = at.hostname.includes(":") ? `[${at.hostname}]` : at.hostname;
  return {
    url: `https://${host}:${server.port}`,
    async stop() {
      deps.sandboxes.close();
      await Promise.race([server.stop(), Bun.sleep(1000)]);
      await server.stop(true);
    },
  };
}
