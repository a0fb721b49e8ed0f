// Error messages name a field's rule in words: every string schema with a
// pattern that shared exports (and so every body, event and file checked
// against them) carries a `rule`, and describeError never shows the pattern.
import { describe, expect, test } from "bun:test";
import { Kind, type TSchema } from "@sinclair/typebox";
import * as shared from "../src/index.ts";
import { BoxCreateBody, BoxName, describeError, firstError, SessionCreateBody, SecretName, UserName } from "../src/index.ts";

/** Every schema inside one, with the dotted way it was reached. */
function* walk(schema: TSchema, at: string, seen = new Set<unknown>()): Generator<[string, TSchema]> {
  if (seen.has(schema)) return;
  seen.add(schema);
  yield [at, schema];
  const s = schema as Record<string, unknown>;
  for (const [k, v] of Object.entries((s.properties ?? {}) as Record<string, TSchema>)) yield* walk(v, `${at}.${k}`, seen);
  for (const [k, v] of Object.entries((s.patternProperties ?? {}) as Record<string, TSchema>)) yield* walk(v, `${at}[${k}]`, seen);
  for (const key of ["items", "additionalProperties", "not"]) {
    const v = s[key];
    if (v && typeof v === "object" && Kind in (v as object)) yield* walk(v as TSchema, `${at}.${key}`, seen);
  }
  for (const key of ["anyOf", "allOf", "oneOf"])
    for (const [i, v] of ((s[key] ?? []) as TSchema[]).entries()) yield* walk(v, `${at}.${key}${i}`, seen);
  if (Array.isArray(s.items)) for (const [i, v] of (s.items as TSchema[]).entries()) yield* walk(v, `${at}.items${i}`, seen);
}

const exported = Object.entries(shared).filter(([, v]) => v && typeof v === "object" && Kind in (v as object)) as [string, TSchema][];

describe("rules in words", () => {
  test("shared exports schemas to walk (the walk itself is not empty)", () => {
    expect(exported.length).toBeGreaterThan(50);
    expect([...walk(SessionCreateBody, "SessionCreateBody")].length).toBeGreaterThan(5);
  });

  test("every patterned string carries a rule", () => {
    const missing = exported.flatMap(([name, schema]) =>
      [...walk(schema, name)].filter(([, s]) => typeof s.pattern === "string" && typeof s.rule !== "string").map(([at]) => at),
    );
    expect(missing).toEqual([]);
  });

  test.each([
    [BoxName, "Bad Name", `box name "Bad Name": use lowercase letters, digits and '-', starting with a letter or digit (at most 63)`],
    [UserName, "9lives", `user name "9lives": use lowercase letters, digits, '_' and '-', starting with a letter (at most 32)`],
    [SecretName, "-x", `secret name "-x": use letters, digits, '_', '.' and '-', starting with a letter or digit (at most 64)`],
  ] as const)("%#: the field's title, the value and the rule", (schema, value, want) => {
    expect(firstError(schema, value)).toBe(want);
  });

  test("a body's field: named by its schema's title, with no pattern in the message", () => {
    const msg = firstError(BoxCreateBody, { name: "Not/OK" });
    expect(msg).toStartWith(`box name "Not/OK": use lowercase letters`);
    expect(msg).not.toMatch(/[\^$[\]{}]/);
  });

  test("a value too long to quote is named, not echoed; a pattern with no rule still shows no pattern", () => {
    expect(firstError(BoxName, "X".repeat(70))).toBe(
      `box name: use lowercase letters, digits and '-', starting with a letter or digit (at most 63)`,
    );
    const bare = { [Kind]: "String", type: "string", pattern: "^a+$" } as unknown as TSchema;
    expect(describeError({ path: "/f", schema: bare, value: "b", message: "Expected string to match '^a+$'" })).toBe(
      `f "b": is not in the form this field takes`,
    );
  });

  test("other failures keep the checker's words, on the dotted path", () => {
    expect(firstError(SessionCreateBody, { cols: "wide" })).toStartWith("cols: Expected");
  });
});
