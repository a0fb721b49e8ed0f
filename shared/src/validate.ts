// Schema checks for untrusted input (guest frames, client bodies), with the
// first failing field named the way error messages show it.
import { Value } from "@sinclair/typebox/value";
import type { Static, TSchema } from "@sinclair/typebox";

export type { Static, TSchema };

export function check<T extends TSchema>(schema: T, value: unknown): value is Static<T> {
  return Value.Check(schema, value);
}

/** "argv: Expected array" — the most specific failing field. */
export function firstError(schema: TSchema, value: unknown): string {
  const errs = [...Value.Errors(schema, value)];
  const best = errs.find((e) => e.path !== "" && e.path !== "/tool" && e.path !== "/type") ?? errs[0];
  if (!best) return "is invalid";
  const field = best.path.replace(/^\//, "").replaceAll("/", ".") || "value";
  return `${field}: ${best.message}`;
}
