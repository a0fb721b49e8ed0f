// Rows of the broker: sealed secrets, each box's egress policy and stubs, and
// a bounded log of recent egress decisions per box.
import type { Database } from "bun:sqlite";
import type { EgressDecision, EgressRecord } from "@hutch/shared";
import { type BrokerTables, EGRESS_KEPT, type PolicyRow } from "./types.ts";

const now = () => new Date().toISOString();

const PRUNE_EVERY = 100;

export class BrokerStore implements BrokerTables {
  private readonly sinceTrim = new Map<string, number>();

  constructor(private readonly db: Database) {}

  setSecret(name: string, sealed: Uint8Array): void {
    const at = now();
    this.db
      .query(
        "INSERT INTO secrets (name, sealed, created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
      )
      .run(name, sealed, at, at);
  }

  sealed(name: string): Uint8Array | undefined {
    const row = this.db.query("SELECT sealed FROM secrets WHERE name = ?").get(name) as { sealed: Uint8Array } | null;
    return row?.sealed;
  }

  secrets(): { name: string; createdAt: string; updatedAt: string }[] {
    return this.db.query("SELECT name, created_at AS createdAt, updated_at AS updatedAt FROM secrets ORDER BY name").all() as {
      name: string;
      createdAt: string;
      updatedAt: string;
    }[];
  }

  removeSecret(name: string): boolean {
    return this.db.query("DELETE FROM secrets WHERE name = ?").run(name).changes > 0;
  }

  policy(boxId: string): PolicyRow {
    const row = this.db.query("SELECT allow, bindings, stubs, unlisted, approval_ms FROM box_policy WHERE box_id = ?").get(boxId) as {
      allow: string;
      bindings: string;
      stubs: string;
      unlisted: string;
      approval_ms: number | null;
    } | null;
    if (!row) return { allow: [], bindings: [], stubs: {} };
    return {
      allow: JSON.parse(row.allow) as string[],
      bindings: JSON.parse(row.bindings) as string[],
      stubs: JSON.parse(row.stubs) as Record<string, string>,
      // The defaults are left out: a policy that never set them reads as it always did.
      ...(row.unlisted === "ask" ? { unlisted: "ask" as const } : {}),
      ...(row.approval_ms ? { approvalMs: row.approval_ms } : {}),
    };
  }

  savePolicy(boxId: string, p: PolicyRow): void {
    this.db
      .query(
        "INSERT INTO box_policy (box_id, allow, bindings, stubs, unlisted, approval_ms) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(box_id) DO UPDATE SET allow = excluded.allow, bindings = excluded.bindings, stubs = excluded.stubs, unlisted = excluded.unlisted, approval_ms = excluded.approval_ms",
      )
      .run(boxId, JSON.stringify(p.allow), JSON.stringify(p.bindings), JSON.stringify(p.stubs), p.unlisted ?? "deny", p.approvalMs ?? null);
  }

  logEgress(boxId: string, record: EgressRecord): void {
    this.db.query("INSERT INTO egress_log (box_id, decision, record) VALUES (?, ?, ?)").run(boxId, record.decision, JSON.stringify(record));
    // Trimming costs more than the insert, so it runs once per PRUNE_EVERY decisions of a box:
    // the log holds between EGRESS_KEPT and EGRESS_KEPT + PRUNE_EVERY rows.
    const n = (this.sinceTrim.get(boxId) ?? 0) + 1;
    this.sinceTrim.set(boxId, n % PRUNE_EVERY);
    if (n >= PRUNE_EVERY) {
      this.db
        .query(
          "DELETE FROM egress_log WHERE box_id = ? AND id <= (SELECT id FROM egress_log WHERE box_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
        )
        .run(boxId, boxId, EGRESS_KEPT);
    }
  }

  egress(boxId: string, decision: EgressDecision | undefined, limit: number): EgressRecord[] {
    const rows = (
      decision
        ? this.db
            .query("SELECT record FROM egress_log WHERE box_id = ? AND decision = ? ORDER BY id DESC LIMIT ?")
            .all(boxId, decision, limit)
        : this.db.query("SELECT record FROM egress_log WHERE box_id = ? ORDER BY id DESC LIMIT ?").all(boxId, limit)
    ) as { record: string }[];
    return rows.map((r) => JSON.parse(r.record) as EgressRecord).reverse();
  }
}
