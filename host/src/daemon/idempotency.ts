// The idempotency key of a request: the Idempotency-Key header, the one way a
// key travels on every route that takes one (checked by the route's headers
// schema, IdempotencyHeaders in shared/src/ops.ts).
import { IDEMPOTENCY_HEADER } from "@hutch/shared";

export const idempotencyKey = (headers: Record<string, string | undefined>): string | null => headers[IDEMPOTENCY_HEADER] ?? null;
