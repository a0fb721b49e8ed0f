// How the daemon's operations are asked for and answered.
import { Type } from "@sinclair/typebox";

/**
 * The one way an idempotency key travels, on every route that takes one: a
 * repeat with the same key returns the first answer and does nothing again.
 */
export const IDEMPOTENCY_HEADER = "idempotency-key";
export const IdempotencyKey = Type.String({ minLength: 1, maxLength: 128, pattern: "^[!-~]+$", description: "1-128 visible ASCII characters, e.g. a UUID" });
/** The headers schema of a route that takes a key (other headers pass). */
export const IdempotencyHeaders = Type.Object({ [IDEMPOTENCY_HEADER]: Type.Optional(IdempotencyKey) });
