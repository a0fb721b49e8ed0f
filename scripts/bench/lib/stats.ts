// Order statistics and formatting shared by the benches.

/** Nearest-rank percentile (p in 0..100) of a non-empty sample. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

/** The median; with an even count, the mean of the middle two. */
export function median(samples: number[]): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** A plain-text table with right-aligned numeric columns. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** The sides in order on even rounds and reversed on odd ones, so that neither always runs first. */
export function alternate<T>(sides: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...sides] : [...sides].reverse();
}

/** How a report says a goal: "met" or "NOT met". */
export const met = (g: { met: boolean }) => (g.met ? "met" : "NOT met");

/** A number with fixed digits, "-" when there is none (a side whose every run failed). */
export const num = (x: number, digits: number) => (Number.isFinite(x) ? x.toFixed(digits) : "-");

/** Runs that worked out of all: "29/30". */
export const okOf = (s: { ok: number; failed: number }) => `${s.ok}/${s.ok + s.failed}`;
