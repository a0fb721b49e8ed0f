// Cron parsing and the times schedules run at, as tables on given instants
// (UTC, so the answers do not depend on the machine's time zone).
import { describe, expect, test } from "bun:test";
import { HutchError } from "@hutch/shared";
import { nextCron, parseCron } from "../src/schedule/cron.ts";
import { hash32, missed, nextDue, parseAt, parseMaxRun, SPREAD_MAX_MS, spreadOf, spreadWindow } from "../src/schedule/when.ts";

const T = (iso: string) => Date.parse(iso);
const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());
const next = (expr: string, after: string) => iso(nextCron(parseCron(expr, { utc: true }), T(after)));

describe("cron: the next time", () => {
  test.each([
    ["* * * * *", "2026-12-03T10:00:30Z", "2026-12-03T10:01:00.000Z"],
    ["* * * * *", "2026-12-03T10:00:00Z", "2026-12-03T10:01:00.000Z"],
    ["*/15 * * * *", "2026-12-03T10:01:00Z", "2026-12-03T10:15:00.000Z"],
    ["5-10/2 * * * *", "2026-12-03T10:06:00Z", "2026-12-03T10:07:00.000Z"],
    ["50/5 * * * *", "2026-12-03T10:56:00Z", "2026-12-03T11:50:00.000Z"],
    ["0,30 9 * * *", "2026-12-03T09:00:00Z", "2026-12-03T09:30:00.000Z"],
    ["0 9 * * mon-fri", "2026-12-04T10:00:00Z", "2026-12-07T09:00:00.000Z"], // Friday after 9 → Monday
    ["0 0 * * 7", "2026-12-03T00:00:00Z", "2026-12-06T00:00:00.000Z"], // 7 is Sunday
    ["0 0 * * SUN", "2026-12-03T00:00:00Z", "2026-12-06T00:00:00.000Z"],
    ["0 0 1 jan *", "2026-12-03T00:00:00Z", "2027-01-01T00:00:00.000Z"],
    ["0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00.000Z"],
    ["0 0 31 * *", "2026-11-01T00:00:00Z", "2026-12-31T00:00:00.000Z"],
    // Both day fields restricted: either matches (the 13th, or any Friday).
    ["0 0 13 * fri", "2026-12-03T00:00:00Z", "2026-12-04T00:00:00.000Z"],
    ["0 0 13 * fri", "2026-12-11T01:00:00Z", "2026-12-13T00:00:00.000Z"],
    ["@hourly", "2026-12-03T10:20:00Z", "2026-12-03T11:00:00.000Z"],
    ["@daily", "2026-12-03T10:20:00Z", "2026-12-04T00:00:00.000Z"],
    ["@weekly", "2026-12-03T10:20:00Z", "2026-12-06T00:00:00.000Z"],
    ["@monthly", "2026-12-03T10:20:00Z", "2027-01-01T00:00:00.000Z"],
  ])("%s after %s is %s", (expr, after, want) => {
    expect(next(expr, after)).toBe(want);
  });
});

describe("cron: refusals name the field and the rule", () => {
  test.each([
    ["", /it is empty/],
    ["* * * *", /it has 4 fields; cron needs exactly five/],
    ["60 * * * *", /minute: 60 is outside 0-59/],
    ["* 24 * * *", /hour: 24 is outside 0-23/],
    ["* * 0 * *", /day of month: 0 is outside 1-31/],
    ["* * * 13 *", /month: 13 is outside 1-12/],
    ["* * * * 8", /day of week: 8 is outside 0-7/],
    ["* * * foo *", /month: "foo" is not a number or a name \(jan-dec\)/],
    ["*/0 * * * *", /minute: the step in "\*\/0" must be a whole number, 1 or more/],
    ["5-1 * * * *", /minute: the range "5-1" runs backwards/],
    ["1,,2 * * * *", /minute: an empty item in a list/],
    ["1-2-3 * * * *", /minute: "1-2-3" is not a range/],
    ["*/2/3 * * * *", /minute: "\*\/2\/3" has more than one "\/"/],
    ["@often", /unknown macro/],
    ["0 0 30 2 *", /day of month: no month named has such a day, so it would never run/],
  ])("%p", (expr, want) => {
    let err: unknown;
    try {
      parseCron(expr);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HutchError);
    expect((err as HutchError).message).toMatch(want);
    expect((err as HutchError).code).toBe("invalid");
  });
});

describe("spread: cron runs of many boxes do not pile up at :00", () => {
  test("the window is half the shortest gap, at most ten minutes", () => {
    const from = T("2026-12-03T10:00:00Z");
    expect(spreadWindow(parseCron("* * * * *", { utc: true }), from)).toBe(30_000);
    expect(spreadWindow(parseCron("*/4 * * * *", { utc: true }), from)).toBe(120_000);
    expect(spreadWindow(parseCron("0 * * * *", { utc: true }), from)).toBe(SPREAD_MAX_MS);
    // The shortest gap decides: 10:00 and 10:01 are a minute apart.
    expect(spreadWindow(parseCron("0,1 10 * * *", { utc: true }), from)).toBe(30_000);
  });

  test("a box's offset is stable, inside the window, in whole seconds; a hundred boxes spread over it", () => {
    const ids = Array.from({ length: 100 }, (_, i) => `box_${String(i).padStart(20, "0")}`);
    const offsets = ids.map((id) => spreadOf(id, SPREAD_MAX_MS));
    expect(ids.map((id) => spreadOf(id, SPREAD_MAX_MS))).toEqual(offsets);
    for (const o of offsets) {
      expect(o).toBeGreaterThanOrEqual(0);
      expect(o).toBeLessThan(SPREAD_MAX_MS);
      expect(o % 1000).toBe(0);
    }
    // Not piled up: no second of the window holds more than a handful, and they reach both halves of it.
    const perSecond = new Map<number, number>();
    for (const o of offsets) perSecond.set(o, (perSecond.get(o) ?? 0) + 1);
    expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(3);
    expect(offsets.some((o) => o < SPREAD_MAX_MS / 2)).toBe(true);
    expect(offsets.some((o) => o >= SPREAD_MAX_MS / 2)).toBe(true);
    expect(spreadOf("box_x", 0)).toBe(0);
    expect(hash32("box_a")).not.toBe(hash32("box_b"));
  });

  test("the next due time is the cron time plus the spread, strictly after now, the spread one included", () => {
    const c = parseCron("0 * * * *", { utc: true });
    const spread = 125_000;
    expect(iso(nextDue(c, spread, T("2026-12-03T10:00:00Z")))).toBe("2026-12-03T10:02:05.000Z");
    // Past 10:00 but before its spread time: 10:00's run is still to come.
    expect(iso(nextDue(c, spread, T("2026-12-03T10:01:00Z")))).toBe("2026-12-03T10:02:05.000Z");
    expect(iso(nextDue(c, spread, T("2026-12-03T10:02:05Z")))).toBe("2026-12-03T11:02:05.000Z");
    expect(iso(nextDue(c, 0, T("2026-12-03T10:02:05Z")))).toBe("2026-12-03T11:00:00.000Z");
  });
});

describe("--at and --max-run", () => {
  const now = T("2026-12-03T10:00:00Z");
  test.each([
    ["+10m", "2026-12-03T10:10:00.000Z"],
    ["90s", "2026-12-03T10:01:30.000Z"],
    ["1h30m", "2026-12-03T11:30:00.000Z"],
    ["2026-12-04T09:00:00Z", "2026-12-04T09:00:00.000Z"],
    ["2026-12-04T09:00:00+01:00", "2026-12-04T08:00:00.000Z"],
  ])("at %s", (text, want) => {
    expect(iso(parseAt(text, now))).toBe(want);
  });

  test("a time in the past, or not a time, is refused saying what is expected", () => {
    expect(() => parseAt("2026-12-03T09:00:00Z", now)).toThrow(/is in the past/);
    expect(() => parseAt("tomorrow", now)).toThrow(/expected an ISO 8601 time .* or a duration from now/);
    expect(() => parseAt("2026-13-45T00:00:00Z", now)).toThrow(/expected an ISO 8601 time/);
  });

  test("max-run: a duration from 1s to 1d, 30m when not given", () => {
    expect(parseMaxRun(undefined, 1_800_000)).toBe(1_800_000);
    expect(parseMaxRun("15m", 0)).toBe(900_000);
    expect(() => parseMaxRun("0s", 0)).toThrow(/expected a duration from 1s to 1d/);
    expect(() => parseMaxRun("2d", 0)).toThrow(/expected a duration from 1s to 1d/);
    expect(() => parseMaxRun("soon", 0)).toThrow(/max-run "soon"/);
  });
});

describe("missed runs", () => {
  const now = T("2026-12-03T10:00:00Z");
  test("at start, any run whose time has passed was missed (the daemon was down then)", () => {
    expect(missed(now - 1000, now, true)).toBe(true);
    expect(missed(now, now, true)).toBe(false);
  });
  test("while running, only a run late by more than five minutes was (a host that slept)", () => {
    expect(missed(now - 60_000, now, false)).toBe(false);
    expect(missed(now - 6 * 60_000, now, false)).toBe(true);
  });
});
