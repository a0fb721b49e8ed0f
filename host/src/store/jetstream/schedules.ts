// Schedules on the registry's KV bucket, one key each (`schedule.<id>`).
// Every change is compare-and-set on the key's revision: claimRun checks the
// next run it was given against the entry it read and writes on that
// revision, so of two servers that saw the same due run exactly one claims
// it; the other reads again, finds the run moved and answers false.
import { HutchError } from "@hutch/shared";
import type { Async, ScheduleFields, ScheduleRow, ScheduleTable } from "../types.ts";
import { type Bucket, type Entry, LOST, token } from "./kv.ts";

const SETTABLE = ["state", "next_at", "last_run", "runs", "skipped"] as const;

const scheduleKey = (id: string) => `schedule.${token(id)}`;

/** The settable fields given (undefined ones left out, as SQLite's UPDATE does). */
function settable(fields: ScheduleFields, except?: keyof ScheduleFields): ScheduleFields {
  const out: Record<string, unknown> = {};
  for (const k of SETTABLE) if (k !== except && k in fields) out[k] = fields[k] ?? null;
  return out as ScheduleFields;
}

const byCreated = (a: ScheduleRow, b: ScheduleRow) =>
  a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

export class KvScheduleTable implements Async<ScheduleTable> {
  constructor(private readonly kv: Bucket) {}

  async insertSchedule(row: ScheduleRow): Promise<void> {
    if ((await this.kv.create(scheduleKey(row.id), row)) === LOST)
      throw new HutchError("conflict", `schedule id ${row.id} is taken`, "make the schedule again: it gets a new id");
  }

  async schedule(id: string): Promise<ScheduleRow | null> {
    return (await this.kv.get<ScheduleRow>(scheduleKey(id)))?.value ?? null;
  }

  async schedules(filter: { owner?: string; boxId?: string } = {}): Promise<ScheduleRow[]> {
    return (await this.all())
      .filter((r) => (filter.owner === undefined || r.owner === filter.owner) && (filter.boxId === undefined || r.box_id === filter.boxId))
      .sort(byCreated);
  }

  async dueSchedules(now: number): Promise<ScheduleRow[]> {
    return (await this.all())
      .filter((r) => r.state === "active" && r.next_at !== null && r.next_at <= now)
      .sort((a, b) => a.next_at! - b.next_at! || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async updateSchedule(id: string, fields: ScheduleFields): Promise<boolean> {
    const change = settable(fields);
    return this.change(id, (row) => (Object.keys(change).length === 0 ? row : { ...row, ...change }));
  }

  async claimRun(id: string, from: number, to: number | null, fields: ScheduleFields): Promise<boolean> {
    const change = settable(fields, "next_at");
    return this.change(id, (row) => (row.state === "active" && row.next_at === from ? { ...row, ...change, next_at: to } : null));
  }

  async removeSchedule(id: string): Promise<boolean> {
    for (;;) {
      const e = await this.kv.get(scheduleKey(id));
      if (!e) return false;
      if ((await this.kv.write(scheduleKey(id), null, e.revision)) !== LOST) return true;
    }
  }

  /** Every schedule with its key (deleteBox removes a box's). */
  async entries(): Promise<Map<string, Entry<ScheduleRow>>> {
    return this.kv.all<ScheduleRow>("schedule.*");
  }

  private async all(): Promise<ScheduleRow[]> {
    return [...(await this.entries()).values()].map((e) => e.value);
  }

  /**
   * Compare-and-set on a schedule: `fn` gives the new row (the same row:
   * nothing to write; null: refused), retried on the row read again when
   * another server wrote first. False when there is no such schedule or fn refuses.
   */
  private async change(id: string, fn: (row: ScheduleRow) => ScheduleRow | null): Promise<boolean> {
    for (;;) {
      const e = await this.kv.get<ScheduleRow>(scheduleKey(id));
      if (!e) return false;
      const next = fn(e.value);
      if (next === null) return false;
      if (next === e.value || (await this.kv.write(scheduleKey(id), next, e.revision)) !== LOST) return true;
    }
  }
}
