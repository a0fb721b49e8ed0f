// The screen a reattach is shown: xterm parses behind the output, and a flood
// must neither throw (xterm discards past 50 MB pending) nor leave the screen
// showing anything but how the output ended.
import { expect, test } from "bun:test";
import { BACKLOG_MAX, PARSE_AHEAD, Screen } from "../src/tools/pty-screen.ts";

const enc = new TextEncoder();

test("a flood written faster than xterm parses is not thrown on; the screen ends as the output did", async () => {
  const s = new Screen(80, 24);
  const block = enc.encode("y\r\n".repeat(100_000));
  let written = 0;
  // 60 MB with no turn of the event loop: xterm alone would throw "write data discarded, use flow control".
  for (; written < 60_000_000; written += block.length) s.write(block);
  s.write(enc.encode("the-end-of-it\r\n"));
  const screen = await s.snapshot();
  expect(screen).toContain("the-end-of-it");
  // What it skipped is counted: all but what fits the parser's share and the backlog.
  expect(s.dropped).toBeGreaterThanOrEqual(written - PARSE_AHEAD - BACKLOG_MAX - block.length);
  expect(s.dropped % block.length).toBe(0);
  s.dispose();
}, 60_000);

test("a snapshot holds what was written before it and nothing after, in order", async () => {
  const s = new Screen(40, 5);
  s.write(enc.encode("before\r\n"));
  const snap = s.snapshot();
  s.write(enc.encode("after\r\n"));
  const text = await snap;
  expect(text).toContain("before");
  expect(text).not.toContain("after");
  expect(await s.snapshot()).toContain("after");
  expect(s.dropped).toBe(0);
  s.dispose();
});
