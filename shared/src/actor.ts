// Who did something, as every event and decision records it.
import { Type, type Static } from "@sinclair/typebox";

export const ActorKind = Type.Union([
  Type.Literal("user"),
  Type.Literal("agent"),
  Type.Literal("ide"),
  Type.Literal("orchestrator"),
  Type.Literal("system"),
]);
export type ActorKind = Static<typeof ActorKind>;

/** Who did it: stamped by the daemon from the connection, never read from a body. */
export const Actor = Type.Object({
  kind: ActorKind,
  /** e.g. "alice" for a user, "alice/agent" for an agent client of alice. */
  id: Type.String({ minLength: 1, maxLength: 128 }),
});
export type Actor = Static<typeof Actor>;
