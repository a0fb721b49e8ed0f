// The daemon's own actor, how actors relate to the users they act for, and
// what a user may do with a session (read by sessions, approvals and the API).
import type { Actor } from "@hutch/shared";

export const SYSTEM: Actor = { kind: "system", id: "hutchd" };

/** The user part of an actor id ("alice/agent" → "alice"). */
export const actorUser = (a: Actor) => a.id.split("/")[0]!;

// Who may do what with a session. A session grants nothing of its own: what a
// user may do with it is what they may do with its box, decided again at every
// call, so narrowing or withdrawing a share takes effect at once for the
// sessions that user opened too. Once the box is gone (sessions outlive their
// boxes) a session stays readable by whoever opened it.

/** What a user may do with a box or a session: everything, drive it, or only look. */
export type SessionAccess = "own" | "drive" | "read";

export function sessionAccess(user: string, opener: string, box: SessionAccess | null, boxExists: () => boolean): SessionAccess | null {
  // Asked only when the box grants nothing: the common answer needs no second look-up.
  if (box || boxExists()) return box;
  return opener === user ? "own" : null;
}
