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
  return describeError(best);
}

/** What a failed check knows: where, against which schema, the value, and the checker's own message. */
export interface CheckFailure {
  path: string;
  schema: TSchema;
  value: unknown;
  message: string;
}

/** Longest value quoted back in an error; a longer one is only named. */
const QUOTED_MAX = 64;

/**
 * One failed check in words: the field (its schema's `title`, else its
 * dotted path), and for a pattern the value and the schema's `rule`, never
 * the regular expression itself (`box name "Bad Name": use lowercase
 * letters, digits and '-', starting with a letter or digit`).
 */
export function describeError(e: CheckFailure): string {
  const schema = e.schema as TSchema & { title?: string; rule?: string; pattern?: string };
  const field = schema.title ?? (e.path.replace(/^\//, "").replaceAll("/", ".") || "value");
  if (typeof schema.pattern === "string" && typeof e.value === "string") {
    const shown = e.value.length <= QUOTED_MAX ? ` ${JSON.stringify(e.value)}` : "";
    return `${field}${shown}: ${schema.rule ?? "is not in the form this field takes"}`;
  }
  return `${field}: ${e.message}`;
}

/**
 * Where a JSON text nests deeper than `maxDepth` (each object or array is one
 * level): the field path of the first container past the limit ("events.0.data.a",
 * "" for the root), or null when it does not. It runs on the text, before
 * JSON.parse, so a hostile body never becomes millions of nested arrays and no
 * schema check or error message recurses through one. Malformed JSON is
 * scanned as far as it goes; JSON.parse reports it.
 */
export function tooDeep(text: string, maxDepth: number): string | null {
  // Per open container: where the key of the member being read starts (objects), or its index (arrays).
  const at: number[] = [];
  const isObject: boolean[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      if (expectKey) at[at.length - 1] = i;
      expectKey = false;
      i = stringEnd(text, i);
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (at.length === maxDepth) return pathAt(text, at, isObject);
      isObject.push(c === 0x7b);
      at.push(c === 0x7b ? -1 : 0);
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      at.pop();
      isObject.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */ && at.length > 0) {
      const top = at.length - 1;
      if (isObject[top]) expectKey = true;
      else at[top]!++;
    }
  }
  return null;
}

/** The dotted path of the members being read, decoding object keys only now that one is needed. */
function pathAt(text: string, at: number[], isObject: boolean[]): string {
  return at
    .map((n, i) => {
      if (!isObject[i]) return String(n);
      try {
        return n < 0 ? "?" : String(JSON.parse(text.slice(n, stringEnd(text, n) + 1)));
      } catch {
        return "?";
      }
    })
    .join(".");
}

/** The index of the quote closing the string that opens at `start` (text.length when none does). */
function stringEnd(text: string, start: number): number {
  for (let i = text.indexOf('"', start + 1); i !== -1; i = text.indexOf('"', i + 1)) {
    // Escaped when an odd number of backslashes runs up to it.
    let slashes = 0;
    while (text.charCodeAt(i - 1 - slashes) === 0x5c /* \ */) slashes++;
    if (slashes % 2 === 0) return i;
  }
  return text.length;
}
