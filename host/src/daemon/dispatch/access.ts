// Who may start, see and cancel a dispatch (server mode). A dispatch copies
// what it starts from into new boxes, so it is held to the rule of a fork:
// a remote user starts one only from a snapshot it may see or a box it owns,
// and another user's is answered exactly as a missing one (404), so ids and
// names do not leak. Dispatches are their starter's: another user's is missing.
import { HutchError, type DispatchCreateBody } from "@hutch/shared";
import { principalOf } from "../actor.ts";
import { checkBoxRef, type AccessDeps } from "../access.ts";
import type { SnapshotAccess } from "../snapshots/index.ts";

export interface DispatchAccess {
  /** Whether the request may use dispatches at all. */
  allowed(req: Request): boolean;
  /** Throws the error to answer when the request may not start a dispatch from what the body names. */
  create(req: Request, body: DispatchCreateBody): Promise<void>;
  /** The user whose dispatches alone the request may see and cancel; null: every one (the local socket). */
  scope(req: Request): string | null;
}

export const OPEN: DispatchAccess = { allowed: () => true, create: async () => {}, scope: () => null };

/**
 * Server mode. Remote users with an admin token only, for now: the
 * per-token limits are not yet kept for the boxes a dispatch makes.
 */
export function dispatchAccess(gate: AccessDeps, snapshots: SnapshotAccess): DispatchAccess {
  return {
    allowed(req) {
      const p = principalOf(req);
      return !p?.remote || p.scopes.includes("admin");
    },
    async create(req, body) {
      const p = principalOf(req);
      if (!p?.remote) return;
      // As `snapshot browse`: another user's snapshot is a missing one.
      if (body.from !== undefined) await snapshots.snapshot(req, body.from);
      if (body.box === undefined) return;
      // Not one it may see: missing. Shared read-only: refused. A missing box goes on to the service, which names it.
      checkBoxRef(gate, p, body.box);
      const found = gate.boxes.find(body.box);
      // Shared to drive is not enough: its snapshot (the workers' base) would be its owner's, and ownBox deletes it.
      if (found && gate.auth.access(p, found.id) !== "own")
        throw new HutchError(
          "denied",
          `box "${body.box}" is shared with you, not yours: a dispatch copies it into new boxes`,
          "ask its owner to dispatch from it, or dispatch from a box of your own",
        );
    },
    scope(req) {
      const p = principalOf(req);
      return p?.remote ? p.user : null;
    },
  };
}
