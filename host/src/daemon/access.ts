// What a remote principal may reach, decided from the method and path before
// any handler runs (for the two WebSocket upgrades too, which bypass Elysia).
// Another user's box or session is answered exactly as a missing one (404),
// so names do not leak. The local socket's principal passes untouched.
import { HutchError } from "@hutch/shared";
import type { AuthService, Principal } from "../auth/service.ts";
import type { BoxService } from "../box/service.ts";
import type { SessionLog } from "../store/types.ts";
import { sessionAccess } from "../actors.ts";

export interface AccessDeps {
  auth: AuthService;
  boxes: BoxService;
  sessionStore: SessionLog;
}

const BOX = /^\/v1\/boxes\/([^/]+)(\/[^/]+)?/;
const SESSION = /^\/v1\/sessions\/(ses_[0-9a-z]{20})(\/.+)?$/;
/** What only an admin token may reach: the server's shared parts, and what is not yet kept per user. */
const ADMIN_ALWAYS = /^\/v1\/(users|tokens|snapshots\/prune|snapshots\/check|fleet)(\/|$)/;
const ADMIN_WRITE = /^\/v1\/(images|agents|pools)(\/|$)/;
/** Session routes a read-only share allows besides GETs: anyone who may see a session may annotate it. */
const READ_SESSION_WRITES = /^\/(annotations)$/;

const isRead = (method: string) => method === "GET" || method === "HEAD";

function denied(what: string, hint: string): HutchError {
  return new HutchError("denied", what, hint);
}

/** Throws the error a remote principal gets for this request, or returns when it may go on. */
export function checkAccess(deps: AccessDeps, p: Principal | undefined, method: string, url: URL): void {
  if (!p?.remote) return;
  const path = url.pathname;
  const admin = p.scopes.includes("admin");
  const upgrade = path.endsWith("/stream");
  if (!isRead(method) || upgrade) {
    if (!p.scopes.includes("write") && !admin) throw denied("this token is read-only", "ask for a token with --scope write");
  }
  if (!admin && (ADMIN_ALWAYS.test(path) || (ADMIN_WRITE.test(path) && !isRead(method))))
    throw denied(`${path} is the server admin's`, "ask the server's admin, or for a token with --scope admin");
  const box = BOX.exec(path);
  if (box) {
    const ref = decodeURIComponent(box[1]!);
    const session = upgrade ? url.searchParams.get("session") : null;
    // A stream that attaches to a session is input into it: its box must be the named one, and the caller may drive it.
    if (session !== null) checkAttach(deps, p, ref, session);
    return checkBox(deps, p, method, ref, box[2] ?? "", upgrade);
  }
  const ses = SESSION.exec(path);
  if (ses) return checkSession(deps, p, method, ses[1]!, ses[2] ?? "");
}

/** For a body that names a box to act on (a session created on it): the principal must own it or drive it. */
export function checkBoxRef(deps: AccessDeps, p: Principal | undefined, ref: string): void {
  if (p?.remote) checkBox(deps, p, "POST", ref, "/sessions", false);
}

function checkBox(deps: AccessDeps, p: Principal, method: string, ref: string, rest: string, upgrade: boolean): void {
  const found = deps.boxes.find(ref);
  // A missing box goes on to its handler, which names it as missing; an upgrade has no handler to do that.
  if (!found) {
    if (upgrade) throw new HutchError("not_found", `no box named "${ref}"`, "list boxes: hutch box list");
    return;
  }
  const access = deps.auth.access(p, found.id);
  if (access === null) throw new HutchError("not_found", `no box named "${ref}"`, "list boxes: hutch box list");
  if (access === "own") return;
  if (access === "read" && (upgrade || !isRead(method)))
    throw denied(`box "${ref}" is shared with you read-only`, "watch its sessions; ask its owner to share it with --drive");
  if (access === "drive" && (method === "DELETE" || method === "PATCH" || rest === "/shares"))
    throw denied(`box "${ref}" is shared with you to drive, not to change`, "ask its owner");
}

function checkAttach(deps: AccessDeps, p: Principal, ref: string, id: string): void {
  const row = deps.sessionStore.get(id);
  const box = deps.boxes.find(ref);
  if (!row || !box || row.box_id !== box.id)
    throw new HutchError("not_found", `box "${ref}" has no session "${id}"`, "list its sessions: hutch session list --box BOX");
  checkSession(deps, p, "POST", id, "/attach");
}

function checkSession(deps: AccessDeps, p: Principal, method: string, id: string, rest: string): void {
  const row = deps.sessionStore.get(id);
  if (!row) return;
  const access = p.remote
    ? sessionAccess(p.user, row.owner, deps.auth.userAccess(p.user, row.box_id), () => deps.boxes.byId(row.box_id) !== null)
    : "own";
  if (access === null) throw new HutchError("not_found", `no session "${id}"`, "list sessions: hutch session list");
  if (access === "read" && !isRead(method) && !READ_SESSION_WRITES.test(rest))
    throw denied(
      `session ${id} is on a box shared with you read-only`,
      "watch and annotate it; ask its owner to share the box with --drive",
    );
}
