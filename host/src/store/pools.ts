// The warm pools a server without a fleet wants: one row per engine and image.
import type { Database } from "bun:sqlite";
import { check, PoolSpec } from "@hutch/shared";
import { Listeners } from "../listeners.ts";
import type { PoolSizes } from "./types.ts";

export class PoolTable implements PoolSizes {
  private readonly changed = new Listeners<[]>("pool sizes");

  constructor(private readonly db: Database) {}

  list(): PoolSpec[] {
    const rows = this.db.query("SELECT spec FROM pools ORDER BY engine, image").all() as { spec: string }[];
    return rows.map((r) => JSON.parse(r.spec) as unknown).filter((s): s is PoolSpec => check(PoolSpec, s));
  }

  async set(spec: PoolSpec): Promise<void> {
    this.db
      .query("INSERT INTO pools (engine, image, spec) VALUES (?, ?, ?) ON CONFLICT (engine, image) DO UPDATE SET spec = excluded.spec")
      .run(spec.engine, spec.image, JSON.stringify(spec));
    this.changed.emit();
  }

  async clear(engine: string, image: string): Promise<boolean> {
    const gone = this.db.query("DELETE FROM pools WHERE engine = ? AND image = ?").run(engine, image).changes > 0;
    if (gone) this.changed.emit();
    return gone;
  }

  onChange(fn: () => void): void {
    this.changed.add(fn);
  }
}
