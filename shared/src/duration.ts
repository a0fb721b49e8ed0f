// Durations as people type them: 90s, 10m, 1h30m, 2d, 500ms (a bare number is
// seconds). Runtime-neutral: the daemon resolves them (a remote daemon with its
// own clock), and a CLI may check them before it sends.

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds, or null when the text is not a duration. */
export function parseDuration(text: string): number | null {
  const s = text.trim().toLowerCase();
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  if (!/^(\d+(ms|s|m|h|d))+$/.test(s)) return null;
  let ms = 0;
  for (const m of s.matchAll(/(\d+)(ms|s|m|h|d)/g)) ms += Number(m[1]) * UNITS[m[2]!]!;
  return ms;
}
