// turn(): how the store's long loops let the daemon's event loop run
// (terminals, logs, the broker) while they work.
import { describe, expect, test } from "bun:test";
import { SLICE_MS, turn } from "../src/snapshot/turns.ts";

const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until) {}
};

describe("turns", () => {
  test("within a slice turn() waits for nothing; past it, others' callbacks run first", async () => {
    busy(SLICE_MS + 1);
    await turn(); // yields, and a fresh slice begins
    let ran = false;
    setImmediate(() => {
      ran = true;
    });
    expect(turn()).toBeUndefined();
    await turn();
    expect(ran).toBe(false);
    busy(SLICE_MS + 5);
    await turn();
    expect(ran).toBe(true);
  });
});
