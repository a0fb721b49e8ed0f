// A tool stream's close error becomes the CLI's named error: code, message and
// the next step each from their own field of the close (guest/PROTOCOL.md).
import { expect, test } from "bun:test";
import { streamError } from "../src/client/stream.ts";

test.each([
  [
    {
      code: "conflict",
      message: "session s is driven by a; only the driver sends input",
      hint: "take it over: hutch session driver steal s",
    },
    ["conflict", "session s is driven by a; only the driver sends input", "take it over: hutch session driver steal s"],
  ],
  [{ code: "not_found", message: "no such file; or directory" }, ["not_found", "no such file; or directory", undefined]],
  [{ code: "channel_lost", message: "the daemon closed the stream" }, ["unavailable", "the daemon closed the stream", undefined]],
  [{ code: "from-the-future", message: "m" }, ["failed", "m", undefined]],
] as const)("%j", (close, [code, message, hint]) => {
  const e = streamError(close);
  expect([e.code, e.message, e.hint]).toEqual([code, message, hint]);
});
