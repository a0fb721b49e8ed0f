// Schedules: one row each, read by the daemon's timer (host/src/schedule).
import type { Database } from "bun:sqlite";
import type { ScheduleFields, ScheduleRow, ScheduleTable } from "./types.ts";

const COLUMNS = [
  "id",
  "box_id",
  "owner",
  "agent",
  "prompt",
  "cron",
  "at",
  "max_run_ms",
  "catch_up",
  "spread_ms",
  "state",
  "next_at",
  "last_run",
  "runs",
  "skipped",
  "created_at",
] as const;

const SETTABLE = new Set<string>(["state", "next_at", "last_run", "runs", "skipped"]);

export class ScheduleStore implements ScheduleTable {
  constructor(private readonly db: Database) {}

  insertSchedule(row: ScheduleRow): void {
    this.db
      .query(`INSERT INTO schedules (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map(() => "?").join(", ")})`)
      .run(...COLUMNS.map((c) => row[c]));
  }

  schedule(id: string): ScheduleRow | null {
    return this.db.query("SELECT * FROM schedules WHERE id = ?").get(id) as ScheduleRow | null;
  }

  schedules(filter: { owner?: string; boxId?: string } = {}): ScheduleRow[] {
    const where: string[] = [];
    const args: string[] = [];
    if (filter.owner !== undefined) {
      where.push("owner = ?");
      args.push(filter.owner);
    }
    if (filter.boxId !== undefined) {
      where.push("box_id = ?");
      args.push(filter.boxId);
    }
    return this.db
      .query(`SELECT * FROM schedules${where.length ? ` WHERE ${where.join(" AND ")}` : ""} ORDER BY created_at, id`)
      .all(...args) as ScheduleRow[];
  }

  dueSchedules(now: number): ScheduleRow[] {
    return this.db
      .query("SELECT * FROM schedules WHERE state = 'active' AND next_at IS NOT NULL AND next_at <= ? ORDER BY next_at, id")
      .all(now) as ScheduleRow[];
  }

  updateSchedule(id: string, fields: ScheduleFields): boolean {
    const keys = Object.keys(fields).filter((k) => SETTABLE.has(k)) as (keyof ScheduleFields)[];
    if (keys.length === 0) return this.schedule(id) !== null;
    return (
      this.db
        .query(`UPDATE schedules SET ${keys.map((k) => `${k} = ?`).join(", ")} WHERE id = ?`)
        .run(...keys.map((k) => fields[k] ?? null), id).changes > 0
    );
  }

  claimRun(id: string, from: number, to: number | null, fields: ScheduleFields): boolean {
    const keys = Object.keys(fields).filter((k) => SETTABLE.has(k) && k !== "next_at") as (keyof ScheduleFields)[];
    return (
      this.db
        .query(
          `UPDATE schedules SET next_at = ?${keys.map((k) => `, ${k} = ?`).join("")} WHERE id = ? AND state = 'active' AND next_at = ?`,
        )
        .run(to, ...keys.map((k) => fields[k] ?? null), id, from).changes > 0
    );
  }

  removeSchedule(id: string): boolean {
    return this.db.query("DELETE FROM schedules WHERE id = ?").run(id).changes > 0;
  }
}
