// Which snapshots a retention policy keeps (restic's forget rules), as a pure
// function. Buckets are UTC (hour, day, ISO week, month, year), so the answer
// does not depend on the machine's time zone. Policies apply to each source
// on its own. An empty policy keeps everything.

export interface KeepPolicy {
  keepLast?: number;
  keepHourly?: number;
  keepDaily?: number;
  keepWeekly?: number;
  keepMonthly?: number;
  keepYearly?: number;
  /** Keep every snapshot this recent, measured back from the newest of its source. */
  keepWithinMs?: number;
  /** Keep every snapshot carrying one of these tags. */
  keepTags?: string[];
}

export interface Dated {
  id: string;
  time: number;
  source: string;
  tags: string[];
}

function isoWeek(d: Date): string {
  const t = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
  const day = t.getUTCDay() || 7;
  t.setUTCDate(t.getUTCDate() + 4 - day);
  const yearStart = Date.UTC(t.getUTCFullYear(), 0, 1);
  return `${t.getUTCFullYear()}-W${Math.ceil(((t.getTime() - yearStart) / 86400000 + 1) / 7)}`;
}

const BUCKETS: [keyof KeepPolicy, (d: Date) => string][] = [
  ["keepHourly", (d) => d.toISOString().slice(0, 13)],
  ["keepDaily", (d) => d.toISOString().slice(0, 10)],
  ["keepWeekly", isoWeek],
  ["keepMonthly", (d) => d.toISOString().slice(0, 7)],
  ["keepYearly", (d) => d.toISOString().slice(0, 4)],
];

export function isEmptyPolicy(p: KeepPolicy): boolean {
  return !Object.values(p).some((v) => (Array.isArray(v) ? v.length > 0 : v !== undefined && v > 0));
}

/** The ids a policy keeps; every other snapshot would be forgotten. */
export function keptByPolicy(snapshots: Dated[], policy: KeepPolicy): Set<string> {
  const keep = new Set<string>();
  if (isEmptyPolicy(policy)) {
    for (const s of snapshots) keep.add(s.id);
    return keep;
  }
  const bySource = new Map<string, Dated[]>();
  for (const s of snapshots) bySource.set(s.source, [...(bySource.get(s.source) ?? []), s]);
  for (const group of bySource.values()) {
    const newestFirst = [...group].sort((a, b) => b.time - a.time || (a.id < b.id ? 1 : -1));
    for (const s of newestFirst.slice(0, policy.keepLast ?? 0)) keep.add(s.id);
    for (const [field, bucket] of BUCKETS) {
      const n = (policy[field] as number | undefined) ?? 0;
      const seen = new Set<string>();
      for (const s of newestFirst) {
        if (seen.size >= n) break;
        const b = bucket(new Date(s.time));
        if (seen.has(b)) continue;
        seen.add(b);
        keep.add(s.id);
      }
    }
    if (policy.keepWithinMs !== undefined && newestFirst.length > 0) {
      const from = newestFirst[0]!.time - policy.keepWithinMs;
      for (const s of newestFirst) if (s.time >= from) keep.add(s.id);
    }
    if (policy.keepTags && policy.keepTags.length > 0) {
      for (const s of newestFirst) if (s.tags.some((t) => policy.keepTags!.includes(t))) keep.add(s.id);
    }
  }
  return keep;
}
