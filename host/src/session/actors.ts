// The daemon's own actor, and how actors relate to the users they act for.
import type { Actor } from "@hutch/shared";

export const SYSTEM: Actor = { kind: "system", id: "hutchd" };

/** The user part of an actor id ("alice/agent" → "alice"). */
export const actorUser = (a: Actor) => a.id.split("/")[0]!;
