// Five-field cron expressions (minute hour day-of-month month day-of-week),
// as Vixie cron reads them: `*`, numbers, ranges `a-b`, steps `*/n`, `a-b/n`
// and `a/n` (a to the field's end), lists `a,b-c`, month and weekday names
// (jan-dec, sun-sat; 0 and 7 are both Sunday), and the macros @hourly,
// @daily (@midnight), @weekly, @monthly, @yearly (@annually). When both
// day fields are restricted a day matches either (cron's rule). Times are
// the daemon's local time unless `utc` is asked for.
//
// A bad expression is refused naming the field and the rule it broke, in
// words; one that can never match (`0 0 30 2 *`) is refused too, so a
// schedule that would never run is never stored.
import { HutchError } from "@hutch/shared";

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
}

const FIELDS: readonly FieldSpec[] = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  {
    name: "month",
    min: 1,
    max: 12,
    names: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
  },
  { name: "day of week", min: 0, max: 7, names: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] },
];

const MACROS: Record<string, string> = {
  "@hourly": "0 * * * *",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@weekly": "0 0 * * 0",
  "@monthly": "0 0 1 * *",
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
};

export interface Cron {
  /** The expression as given. */
  source: string;
  minutes: ReadonlySet<number>;
  hours: ReadonlySet<number>;
  days: ReadonlySet<number>;
  months: ReadonlySet<number>;
  /** 0-6, Sunday 0 (a 7 in the expression is folded into 0). */
  weekdays: ReadonlySet<number>;
  /** Whether each day field was `*` (cron's either-day rule applies only when both are restricted). */
  anyDay: boolean;
  anyWeekday: boolean;
  utc: boolean;
}

const HINT = 'five fields: minute hour day-of-month month day-of-week, e.g. "*/15 9-17 * * mon-fri"';

function bad(field: FieldSpec | null, expr: string, rule: string): HutchError {
  return new HutchError("invalid", `cron "${expr}": ${field ? `${field.name}: ` : ""}${rule}`, HINT);
}

function value(f: FieldSpec, expr: string, word: string): number {
  const lower = word.toLowerCase();
  const named = f.names?.indexOf(lower) ?? -1;
  if (named >= 0) return named + (f.name === "month" ? 1 : 0);
  if (!/^\d+$/.test(word)) {
    const names = f.names ? ` or a name (${f.names[0]}-${f.names.at(-1)})` : "";
    throw bad(f, expr, `"${word}" is not a number${names}`);
  }
  const n = Number(word);
  if (n < f.min || n > f.max) throw bad(f, expr, `${n} is outside ${f.min}-${f.max}`);
  return n;
}

function field(f: FieldSpec, expr: string, text: string): Set<number> {
  const out = new Set<number>();
  for (const part of text.split(",")) {
    if (part === "") throw bad(f, expr, "an empty item in a list (two commas, or one at an end)");
    const [range, stepText, extra] = part.split("/");
    if (extra !== undefined) throw bad(f, expr, `"${part}" has more than one "/"`);
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText) || Number(stepText) < 1) throw bad(f, expr, `the step in "${part}" must be a whole number, 1 or more`);
      step = Number(stepText);
    }
    let lo: number;
    let hi: number;
    if (range === "*") {
      lo = f.min;
      hi = f.max === 7 ? 6 : f.max;
    } else if (range!.includes("-")) {
      const [a, b, more] = range!.split("-");
      if (more !== undefined || !a || !b) throw bad(f, expr, `"${range}" is not a range like 1-5`);
      lo = value(f, expr, a);
      hi = value(f, expr, b);
      if (lo > hi) throw bad(f, expr, `the range "${range}" runs backwards (${lo} is after ${hi})`);
    } else {
      lo = value(f, expr, range!);
      // `a/n` runs from a to the field's end.
      hi = stepText !== undefined ? (f.max === 7 ? 6 : f.max) : lo;
    }
    for (let v = lo; v <= hi; v += step) out.add(f.max === 7 && v === 7 ? 0 : v);
  }
  return out;
}

/** Parses an expression; throws a HutchError naming the field and the rule it broke. */
export function parseCron(expr: string, opts: { utc?: boolean } = {}): Cron {
  const source = expr.trim();
  if (source === "") throw bad(null, expr, "it is empty");
  const expanded = source.startsWith("@") ? MACROS[source.toLowerCase()] : source;
  if (expanded === undefined) throw bad(null, expr, `unknown macro; use one of ${Object.keys(MACROS).join(", ")}`);
  const parts = expanded.split(/\s+/);
  if (parts.length !== 5) throw bad(null, expr, `it has ${parts.length} field${parts.length === 1 ? "" : "s"}; cron needs exactly five`);
  const sets = parts.map((p, i) => field(FIELDS[i]!, source, p));
  const cron: Cron = {
    source,
    minutes: sets[0]!,
    hours: sets[1]!,
    days: sets[2]!,
    months: sets[3]!,
    weekdays: sets[4]!,
    anyDay: parts[2] === "*",
    anyWeekday: parts[4] === "*",
    utc: opts.utc ?? false,
  };
  if (nextCron(cron, Date.UTC(2000, 0, 1)) === null) {
    throw bad(FIELDS[2]!, source, "no month named has such a day, so it would never run");
  }
  return cron;
}

/** The fields of an instant in the cron's time zone. */
function parts(c: Cron, d: Date) {
  return c.utc
    ? { month: d.getUTCMonth() + 1, day: d.getUTCDate(), weekday: d.getUTCDay(), hour: d.getUTCHours(), minute: d.getUTCMinutes() }
    : { month: d.getMonth() + 1, day: d.getDate(), weekday: d.getDay(), hour: d.getHours(), minute: d.getMinutes() };
}

function dayMatches(c: Cron, day: number, weekday: number): boolean {
  const byDay = c.days.has(day);
  const byWeekday = c.weekdays.has(weekday);
  if (!c.anyDay && !c.anyWeekday) return byDay || byWeekday;
  return byDay && byWeekday;
}

/** The start of the next hour, day or month after `t`, in the cron's time zone. */
function nextBoundary(c: Cron, t: number, unit: "hour" | "day" | "month"): number {
  const d = new Date(t);
  if (c.utc) {
    if (unit === "month") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    if (unit === "day") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours() + 1);
  }
  if (unit === "month") return new Date(d.getFullYear(), d.getMonth() + 1, 1).getTime();
  if (unit === "day") return new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1).getTime();
  // Local hours can be shorter or longer around a clock change: step by the hour in real time.
  const next = new Date(t);
  next.setMinutes(0, 0, 0);
  return next.getTime() + 3_600_000;
}

/** The search gives up after this many years (a day that exists only in leap years is found within eight). */
const HORIZON_MS = 9 * 366 * 86_400_000;

/** The first minute strictly after `after` (ms since the epoch) that the expression matches, or null if none within the horizon. */
export function nextCron(c: Cron, after: number): number | null {
  let t = Math.floor(after / 60_000) * 60_000 + 60_000;
  const end = after + HORIZON_MS;
  while (t <= end) {
    const p = parts(c, new Date(t));
    if (!c.months.has(p.month)) t = nextBoundary(c, t, "month");
    else if (!dayMatches(c, p.day, p.weekday)) t = nextBoundary(c, t, "day");
    else if (!c.hours.has(p.hour)) t = nextBoundary(c, t, "hour");
    else if (!c.minutes.has(p.minute)) t += 60_000;
    else return t;
  }
  return null;
}
