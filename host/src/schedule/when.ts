// When a schedule runs: a cron time plus its box's spread, a one-off's time,
// and which due runs count as missed. Pure functions of the time given, so
// tests run them on any clock.
import { HutchError, parseDuration } from "@hutch/shared";
import { type Cron, nextCron } from "./cron.ts";

/** Cron runs are spread over at most this much after their time... */
export const SPREAD_MAX_MS = 10 * 60_000;
/** ...and never more than half the shortest gap between the expression's times, so runs keep their order. */
const GAP_SAMPLES = 100;

/** A run that came due this long before the scheduler saw it (a host that slept, a clock that jumped) counts as missed. */
export const LATE_MS = 5 * 60_000;

/** FNV-1a, 32 bits: a stable hash of a box id. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The spread window of an expression: the lesser of SPREAD_MAX_MS and half its shortest gap (over its next runs from `from`). */
export function spreadWindow(c: Cron, from: number): number {
  let gap = Number.POSITIVE_INFINITY;
  let t = nextCron(c, from);
  for (let i = 0; t !== null && i < GAP_SAMPLES; i++) {
    const n = nextCron(c, t);
    if (n === null) break;
    gap = Math.min(gap, n - t);
    t = n;
  }
  return Math.min(SPREAD_MAX_MS, Number.isFinite(gap) ? Math.floor(gap / 2) : SPREAD_MAX_MS);
}

/** The box's offset within the window, in whole seconds: the same for every schedule of the box. */
export function spreadOf(boxId: string, window: number): number {
  const seconds = Math.floor(window / 1000);
  return seconds <= 0 ? 0 : (hash32(boxId) % seconds) * 1000;
}

/** The first cron time plus spread that falls strictly after `after`; null when the expression has no more. */
export function nextDue(c: Cron, spread: number, after: number): number | null {
  // A time before `after` can still be due after it once spread: start that far back.
  let t = nextCron(c, after - spread - 60_000);
  while (t !== null && t + spread <= after) t = nextCron(c, t);
  return t === null ? null : t + spread;
}

/** A one-off's time: an ISO 8601 time, or a duration from `now` (+10m, 90s, 1h30m). Refused when it is not in the future. */
export function parseAt(text: string, now: number): number {
  const s = text.trim();
  const rel = parseDuration(s.startsWith("+") ? s.slice(1) : s);
  let t: number;
  if (rel !== null) t = now + rel;
  else {
    if (!/^\d{4}-\d{2}-\d{2}/.test(s)) throw badAt(text);
    t = Date.parse(s);
    if (Number.isNaN(t)) throw badAt(text);
  }
  if (t <= now)
    throw new HutchError(
      "invalid",
      `at "${text}" is in the past (${new Date(t).toISOString()}, now ${new Date(now).toISOString()})`,
      "give a later time, or a duration from now: --at +10m",
    );
  return t;
}

function badAt(text: string): HutchError {
  return new HutchError(
    "invalid",
    `at "${text}": expected an ISO 8601 time (2026-12-04T09:00:00Z, or without Z for the daemon's local time) or a duration from now (+10m, 90s, 1h30m)`,
    "e.g. --at +30m or --at 2026-12-04T09:00:00Z",
  );
}

/** A --max-run duration in ms: at least a second, at most a day. */
export function parseMaxRun(text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const ms = parseDuration(text);
  if (ms === null || ms < 1000 || ms > 86_400_000)
    throw new HutchError("invalid", `max-run "${text}": expected a duration from 1s to 1d (90s, 10m, 1h30m)`, "e.g. --max-run 15m");
  return ms;
}

/**
 * Whether a run due at `due` and seen at `now` was missed: its time came while
 * no scheduler was running (`starting`: the first look after the daemon
 * started), or so long ago that the host must have slept through it.
 */
export function missed(due: number, now: number, starting: boolean): boolean {
  return starting ? due < now : now - due > LATE_MS;
}
