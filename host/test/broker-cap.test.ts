// The per-box connection cap (cap.ts) with a clock the test drives: admission
// up to the cap, release, and refusals recorded at most once per interval.
import { expect, test } from "bun:test";
import { ConnCap, type CapClock } from "../src/broker/cap.ts";

function manualClock() {
  let t = 0;
  const timers: { at: number; fn: () => void; live: boolean }[] = [];
  const clock: CapClock = {
    now: () => t,
    after(ms, fn) {
      const timer = { at: t + ms, fn, live: true };
      timers.push(timer);
      return {
        cancel: () => {
          timer.live = false;
        },
      };
    },
  };
  const advance = (ms: number) => {
    t += ms;
    for (const timer of timers.filter((x) => x.live && x.at <= t)) {
      timer.live = false;
      timer.fn();
    }
  };
  return { clock, advance };
}

test("admits up to the cap, then refuses until one is released", () => {
  const cap = new ConnCap(3, () => {}, manualClock().clock);
  expect([cap.admit(), cap.admit(), cap.admit(), cap.admit()]).toEqual([true, true, true, false]);
  expect(cap.open).toBe(3);
  cap.release();
  expect(cap.admit()).toBe(true);
  expect(cap.admit()).toBe(false);
});

test("a burst of refusals is one record at once and one per second after, counting every refusal", () => {
  const { clock, advance } = manualClock();
  const records: number[] = [];
  const cap = new ConnCap(1, (n) => records.push(n), clock, 1000);
  cap.admit();
  // 2,500 refusals over 2.5 s: the first recorded at once, the rest folded into one record per second.
  for (let i = 0; i < 2500; i++) {
    cap.admit();
    advance(1);
  }
  expect(records).toEqual([1, 999, 1000]);
  cap.close();
  expect(records).toEqual([1, 999, 1000, 500]);
});

test("a refusal after a quiet interval is recorded at once", () => {
  const { clock, advance } = manualClock();
  const records: number[] = [];
  const cap = new ConnCap(0, (n) => records.push(n), clock, 1000);
  cap.admit();
  advance(5000);
  cap.admit();
  expect(records).toEqual([1, 1]);
});

test("refusals pending at close are recorded, and nothing fires after", () => {
  const { clock, advance } = manualClock();
  const records: number[] = [];
  const cap = new ConnCap(0, (n) => records.push(n), clock, 1000);
  cap.admit();
  cap.admit();
  cap.admit();
  expect(records).toEqual([1]);
  cap.close();
  expect(records).toEqual([1, 2]);
  advance(5000);
  expect(records).toEqual([1, 2]);
});
