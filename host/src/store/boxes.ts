// Rows of boxes and their op journal. No engine, no HTTP: just state.
import type { Database } from "bun:sqlite";
import { HutchError, newId, type BoxPolicy, type BoxState, type DesiredState, type EngineName, type Op } from "@hutch/shared";
import type { BoxRegistry, BoxRow, OpKind, PolicyRow } from "./types.ts";

interface OpRow {
  id: string;
  box_id: string;
  kind: string;
  idem_key: string | null;
  status: "pending" | "done" | "failed";
  phase: string | null;
  error: string | null;
  created_at: string;
  updated_at: string;
}

const now = () => new Date().toISOString();

/** Tables whose rows belong to one box and go with it (the broker's policy and egress log among them). */
const BOX_TABLES = ["ops", "box_policy", "egress_log", "box_owners", "box_shares", "schedules"] as const;

export function toOp(row: OpRow): Op {
  return {
    id: row.id,
    boxId: row.box_id,
    kind: row.kind,
    status: row.status,
    ...(row.error ? { error: row.error } : {}),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export class BoxStore implements BoxRegistry {
  constructor(private readonly db: Database) {}

  list(): BoxRow[] {
    return this.db.query("SELECT * FROM boxes ORDER BY created_at, rowid").all() as BoxRow[];
  }

  byName(name: string): BoxRow | null {
    return this.db.query("SELECT * FROM boxes WHERE name = ?").get(name) as BoxRow | null;
  }

  byId(id: string): BoxRow | null {
    return this.db.query("SELECT * FROM boxes WHERE id = ?").get(id) as BoxRow | null;
  }

  /** A box by name or id. */
  find(ref: string): BoxRow | null {
    return this.byId(ref) ?? this.byName(ref);
  }

  opByKey(key: string): Op | null {
    const row = this.db.query("SELECT * FROM ops WHERE idem_key = ?").get(key) as OpRow | null;
    return row ? toOp(row) : null;
  }

  op(id: string): Op | null {
    const row = this.db.query("SELECT * FROM ops WHERE id = ?").get(id) as OpRow | null;
    return row ? toOp(row) : null;
  }

  pendingOps(boxId: string): Op[] {
    return (
      this.db.query("SELECT * FROM ops WHERE box_id = ? AND status = 'pending' ORDER BY created_at, rowid").all(boxId) as OpRow[]
    ).map(toOp);
  }

  /** Inserts a box and its create op in one transaction. */
  insertBox(
    name: string,
    engine: EngineName,
    desired: DesiredState,
    idemKey: string | null,
    config: Record<string, unknown> = {},
    policy: BoxPolicy = { allow: [], bindings: [] },
    owner?: string,
    /** The box's id when it exists already elsewhere (a fleet's move or failover makes it again here under its own id). */
    givenId?: string,
  ): { box: BoxRow; op: Op } {
    return this.db.transaction(() => {
      const at = now();
      const id = givenId ?? newId("box");
      this.db
        .query(
          "INSERT INTO boxes (id, name, engine, state, desired, config, created_at, updated_at) VALUES (?, ?, ?, 'creating', ?, ?, ?, ?)",
        )
        .run(id, name, engine, desired, JSON.stringify(config), at, at);
      this.db
        .query("INSERT INTO box_policy (box_id, allow, bindings, unlisted, approval_ms) VALUES (?, ?, ?, ?, ?)")
        .run(
          id,
          JSON.stringify(policy.allow),
          JSON.stringify(policy.bindings),
          policy.unlisted ?? "deny",
          policy.approvalTimeoutMs ?? null,
        );
      // In the same transaction: a box is never visible to its creator's neighbours, not even for a moment.
      if (owner) this.db.query("INSERT INTO box_owners (box_id, owner) VALUES (?, ?)").run(id, owner);
      const op = this.insertOp(id, "create", idemKey);
      return { box: this.byId(id)!, op };
    })();
  }

  /**
   * Stores a box carried in from another server (fleet/carry.ts) under its own
   * id, asleep, with its whole broker policy (its stubs are in its processes'
   * environment) and its owner, all or none. Its directory is in place
   * already; a wake asked for next loads its state. Idempotent for the same
   * box; a conflict when the id or the name is another box's here.
   */
  insertCarried(
    box: { id: string; name: string; engine: EngineName; config: Record<string, unknown>; createdAt: string },
    policy: PolicyRow,
    owner?: string,
  ): BoxRow {
    return this.db.transaction(() => {
      const have = this.byId(box.id);
      if (have && have.name === box.name && have.engine === box.engine) return have;
      const clash = have ?? this.byName(box.name);
      if (clash)
        throw new HutchError(
          "conflict",
          have ? `box ${box.id} exists here already, as "${have.name}"` : `box "${box.name}" already exists here (${clash.id})`,
          `rename or delete the box in the way: hutch box delete ${clash.name}`,
        );
      const at = now();
      this.db
        .query(
          "INSERT INTO boxes (id, name, engine, state, desired, config, created_at, updated_at) VALUES (?, ?, ?, 'asleep', 'asleep', ?, ?, ?)",
        )
        .run(box.id, box.name, box.engine, JSON.stringify(box.config), box.createdAt, at);
      this.db
        .query("INSERT INTO box_policy (box_id, allow, bindings, stubs, unlisted, approval_ms) VALUES (?, ?, ?, ?, ?, ?)")
        .run(
          box.id,
          JSON.stringify(policy.allow),
          JSON.stringify(policy.bindings),
          JSON.stringify(policy.stubs),
          policy.unlisted ?? "deny",
          policy.approvalMs ?? null,
        );
      if (owner) this.db.query("INSERT INTO box_owners (box_id, owner) VALUES (?, ?)").run(box.id, owner);
      return this.byId(box.id)!;
    })();
  }

  /** Records an op and the desired state it asks for, atomically. */
  request(boxId: string, kind: OpKind, desired: DesiredState, idemKey: string | null): Op {
    return this.db.transaction(() => {
      this.db.query("UPDATE boxes SET desired = ?, updated_at = ? WHERE id = ?").run(desired, now(), boxId);
      return this.insertOp(boxId, kind, idemKey);
    })();
  }

  private insertOp(boxId: string, kind: OpKind, idemKey: string | null): Op {
    const at = now();
    const id = newId("op");
    this.db
      .query("INSERT INTO ops (id, box_id, kind, idem_key, status, created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', ?, ?)")
      .run(id, boxId, kind, idemKey, at, at);
    return this.op(id)!;
  }

  setState(boxId: string, state: BoxState, reason: string | null = null): void {
    this.db.query("UPDATE boxes SET state = ?, reason = ?, updated_at = ? WHERE id = ?").run(state, reason, now(), boxId);
  }

  /** Replaces a box's engine settings (limits); the engine applies them at the next start. */
  setConfig(boxId: string, config: Record<string, unknown>): void {
    this.db.query("UPDATE boxes SET config = ?, updated_at = ? WHERE id = ?").run(JSON.stringify(config), now(), boxId);
  }

  /** Settles every pending op of a box: done, or failed with the error. */
  settleOps(boxId: string, error: string | null): void {
    this.db
      .query("UPDATE ops SET status = ?, error = ?, updated_at = ? WHERE box_id = ? AND status = 'pending'")
      .run(error ? "failed" : "done", error, now(), boxId);
  }

  /** Removes every row of the box, its op journal included: a deleted box leaves nothing. */
  deleteBox(boxId: string): void {
    this.db.transaction(() => {
      for (const table of BOX_TABLES) this.db.query(`DELETE FROM ${table} WHERE box_id = ?`).run(boxId);
      this.db.query("DELETE FROM boxes WHERE id = ?").run(boxId);
    })();
  }

  /** Rows anywhere that still name the box (for delete's verification). */
  countRows(boxId: string): number {
    let n = (this.db.query("SELECT count(*) AS n FROM boxes WHERE id = ?").get(boxId) as { n: number }).n;
    for (const table of BOX_TABLES)
      n += (this.db.query(`SELECT count(*) AS n FROM ${table} WHERE box_id = ?`).get(boxId) as { n: number }).n;
    return n;
  }
}
