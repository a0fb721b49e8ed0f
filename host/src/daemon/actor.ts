// Who is calling: stamped from the connection, never from a body. On the
// local socket (mode 0600) every connection is the daemon's own OS user; on
// TCP (server mode) it is the user of the request's token, which the server
// authenticated before the request reached the app. The client declares only
// what kind of client it is.
import { readFileSync } from "node:fs";
import { HutchError, type Actor } from "@hutch/shared";
import type { Principal } from "../auth/service.ts";

export type Identify = (req: Request) => string;

/** The name of the OS user this process runs as, from /etc/passwd (uid<N> when it has none). */
function osUserName(): string {
  const uid = process.getuid?.() ?? 0;
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const [name, , id] = line.split(":");
      if (name && Number(id) === uid) return name;
    }
  } catch {
    // no passwd file: fall through
  }
  return `uid${uid}`;
}

/** The OS user the daemon runs as: the local socket's user (the socket is 0600). */
export const daemonUser = osUserName();

const principals = new WeakMap<Request, Principal>();

/** Records who an authenticated TCP request is; requests without one came through the local socket. */
export function setPrincipal(req: Request, p: Principal): void {
  principals.set(req, p);
}

/** Who a request is, or undefined for the local socket's. */
export const principalOf = (req: Request): Principal | undefined => principals.get(req);

/** The connection's user: its token's (server mode), else the daemon's OS user. */
export const localUser: Identify = (req) => principals.get(req)?.user ?? daemonUser;

const KINDS = { cli: "user", ide: "ide", agent: "agent", orchestrator: "orchestrator" } as const;

export function actorFrom(req: Request, identify: Identify): Actor {
  const user = identify(req);
  const declared = (req.headers.get("x-hutch-client") ?? "cli").toLowerCase();
  const kind = KINDS[declared as keyof typeof KINDS];
  if (!kind) throw new HutchError("invalid", `x-hutch-client: "${declared}" is not one of cli, ide, agent, orchestrator`, "fix the client");
  const name = req.headers.get("x-hutch-client-name");
  if (name !== null && !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(name)) {
    throw new HutchError("invalid", "x-hutch-client-name: lowercase letters, digits, '.', '_' and '-' only", "fix the client");
  }
  const id = kind === "user" ? user : `${user}/${declared}${name ? `:${name}` : ""}`;
  return { kind, id };
}
