// A request/response tool's answer comes from a box: resultOf accepts only a
// result that fits the tool's schema, and names what went wrong otherwise.
import { describe, expect, test } from "bun:test";
import { Type } from "@sinclair/typebox";
import { HutchError } from "../src/errors.ts";
import { resultOf, type StreamEnd } from "../src/protocol/follow.ts";

const Size = Type.Object({ size: Type.Integer({ minimum: 0 }) });
const end = (more: Partial<StreamEnd>): StreamEnd => ({ started: null, exit: null, ...more });
const refused = (e: { code: string; message: string }) => new HutchError("failed", `refused: ${e.message}`);

describe("resultOf", () => {
  test("a result that fits is returned as is", () => {
    expect(resultOf(end({ result: { value: { size: 3 } } }), "fs.write", Size, refused, "hint")).toEqual({ size: 3 });
  });
  test("a close with an error is the caller's refusal", () => {
    expect(() => resultOf(end({ error: { code: "denied", message: "read-only" } }), "fs.write", Size, refused, "hint")).toThrow(
      "refused: read-only",
    );
  });
  test("no result, or one that does not fit, names the tool and carries the hint", () => {
    expect(() => resultOf(end({}), "tar.in", Size, refused, "hutch box info")).toThrow("tar.in ended without a result");
    try {
      resultOf(end({ result: { value: { size: -1 } } }), "tar.in", Size, refused, "hutch box info");
      throw new Error("accepted a malformed result");
    } catch (e) {
      expect((e as HutchError).message).toContain("the box answered tar.in with a malformed result");
      expect((e as HutchError).hint).toBe("hutch box info");
    }
  });
});
