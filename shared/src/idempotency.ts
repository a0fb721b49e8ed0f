// The one way an idempotency key travels, on every route that takes one: a
// repeat with the same key returns the first answer and does nothing again.
// Its own module, without a schema: every CLI write reads this name, and the
// schema library would cost each of them its start-up (ops.ts has the schema).
export const IDEMPOTENCY_HEADER = "idempotency-key";
