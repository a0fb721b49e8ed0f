// The broker's rows on KV: sealed secrets (`secret.<name>`: the sealed bytes
// exactly as given, in base64, never opened here; their times beside them)
// and each box's policy (`policy.<box>`) on the registry's bucket, and the
// egress log on a bucket of its own, one key per decision
// (`<box>.<decision>.<id>`), read in the order stored and trimmed to its
// latest EGRESS_KEPT by the stream itself (a purge keeping that many).
import type { EgressDecision, EgressRecord } from "@hutch/shared";
import { type Async, type BrokerTables, EGRESS_KEPT, type PolicyRow } from "../types.ts";
import { type Bucket, LOST, token } from "./kv.ts";

interface SecretRecord {
  name: string;
  /** The sealed bytes, base64. */
  sealed: string;
  created_at: string;
  updated_at: string;
}

/**
 * Decisions a handle logs for a box between two trims. Between trims the log
 * holds at most this many more than EGRESS_KEPT, from the one server that
 * runs the box (two servers logging one box could each add this many).
 */
const TRIM_EVERY = 50;

const now = () => new Date().toISOString();

export const policyKey = (boxId: string) => `policy.${token(boxId)}`;
export const egressOf = (boxId: string) => `${token(boxId)}.>`;
const secretKey = (name: string) => `secret.${token(name)}`;

/** A policy as read back: the defaults (deny, the default approval time) left out, as on SQLite. */
export function normalPolicy(p: PolicyRow): PolicyRow {
  return {
    allow: p.allow,
    bindings: p.bindings,
    stubs: p.stubs ?? {},
    ...(p.unlisted === "ask" ? { unlisted: "ask" as const } : {}),
    ...(p.approvalMs ? { approvalMs: p.approvalMs } : {}),
  };
}

export class KvBrokerTables implements Async<BrokerTables> {
  private readonly sinceTrim = new Map<string, number>();
  private written = 0;

  constructor(
    private readonly kv: Bucket,
    private readonly egressLog: Bucket,
  ) {}

  async setSecret(name: string, sealed: Uint8Array): Promise<void> {
    const value = Buffer.from(sealed).toString("base64");
    for (;;) {
      const s = await this.kv.slot<SecretRecord>(secretKey(name));
      const at = now();
      const record: SecretRecord = { name, sealed: value, created_at: s.live?.value.created_at ?? at, updated_at: at };
      if ((await this.kv.write(secretKey(name), record, s.after)) !== LOST) return;
    }
  }

  async sealed(name: string): Promise<Uint8Array | undefined> {
    const e = await this.kv.get<SecretRecord>(secretKey(name));
    return e ? new Uint8Array(Buffer.from(e.value.sealed, "base64")) : undefined;
  }

  async secrets(): Promise<{ name: string; createdAt: string; updatedAt: string }[]> {
    return [...(await this.kv.all<SecretRecord>("secret.*")).values()]
      .map((e) => ({ name: e.value.name, createdAt: e.value.created_at, updatedAt: e.value.updated_at }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async removeSecret(name: string): Promise<boolean> {
    for (;;) {
      const e = await this.kv.get(secretKey(name));
      if (!e) return false;
      if ((await this.kv.write(secretKey(name), null, e.revision)) !== LOST) return true;
    }
  }

  async policy(boxId: string): Promise<PolicyRow> {
    const e = await this.kv.get<PolicyRow>(policyKey(boxId));
    return e ? e.value : { allow: [], bindings: [], stubs: {} };
  }

  async savePolicy(boxId: string, p: PolicyRow): Promise<void> {
    await this.kv.put(policyKey(boxId), normalPolicy(p));
  }

  async logEgress(boxId: string, record: EgressRecord): Promise<void> {
    // Unique per handle and time-ordered; the log's order is the stream's, not the key's.
    const id = `${Date.now().toString(36)}${(this.written++).toString(36)}${crypto.randomUUID().slice(0, 8)}`;
    await this.egressLog.put(`${token(boxId)}.${token(record.decision)}.${id}`, record);
    const n = (this.sinceTrim.get(boxId) ?? 0) + 1;
    this.sinceTrim.set(boxId, n % TRIM_EVERY);
    if (n >= TRIM_EVERY) await this.egressLog.trim(egressOf(boxId), EGRESS_KEPT);
  }

  async egress(boxId: string, decision: EgressDecision | undefined, limit: number): Promise<EgressRecord[]> {
    if (limit <= 0) return [];
    const all = await this.egressLog.log<EgressRecord>(decision ? `${token(boxId)}.${token(decision)}.*` : egressOf(boxId));
    return all.slice(-limit);
  }
}
