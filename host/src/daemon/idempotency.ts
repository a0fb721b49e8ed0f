// The idempotency key of a request: the Idempotency-Key header, the one way a
// key travels on every route that takes one (checked by the route's headers
// schema, IdempotencyHeaders in shared/src/ops.ts). A key is the caller's
// user's: it is stored with the user's name in front, so another user sending
// the same key (by chance, or replaying one seen on the wire) makes their own
// answer and never gets the first user's (a box, an op, a seq).
import { IDEMPOTENCY_HEADER } from "@hutch/shared";

/** The request's key, scoped to user (a space parts them: a key holds visible ASCII only), or null without one. */
export const idempotencyKey = (headers: Record<string, string | undefined>, user: string): string | null => {
  const key = headers[IDEMPOTENCY_HEADER];
  return key === undefined ? null : `${user} ${key}`;
};
