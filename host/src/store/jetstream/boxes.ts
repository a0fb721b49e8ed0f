// Boxes and their op journal on a KV bucket. Each box is one entry
// (`box.<id>`) holding its row, its pending ops and its state; every change
// to a box is compare-and-set on that entry's revision, so the entry is
// where writers meet. A unique name (`name.<name>`) and an idempotency key
// (`opkey.<key>`) are create-only claims naming the box (and op) that holds
// them.
//
// The hard part is a write spanning keys, all or none, with no transaction:
// insertBox stores the entry "pending" first, then its claims, and commits by
// turning the entry "live" (compare-and-set); a request commits its op by
// adding it to the entry's pending ops. Readers see a box only when live and
// an op only once committed, so a crash mid-write leaves nothing visible. A
// claim whose holder never committed is taken over only after its holder is
// made unable to commit (compare-and-set on the holder's entry first), and
// only once it is older than `abandonAfterMs`: two racers are refused, never
// both let through. store/README.md walks through each write.
import { HutchError, newId, type BoxPolicy, type BoxState, type DesiredState, type EngineName, type Op } from "@hutch/shared";
import type { Async, BoxRegistry, BoxRow, OpKind } from "../types.ts";
import { type Bucket, type Entry, LOST, token } from "./kv.ts";

/** An op as stored: its row, with the idempotency key it was asked with. */
export interface OpRecord {
  id: string;
  box_id: string;
  kind: OpKind;
  idem_key: string | null;
  status: "pending" | "done" | "failed";
  error: string | null;
  created_at: string;
  updated_at: string;
}

/** `box.<id>`: everything about a box that changes together. */
export interface BoxEntry {
  row: BoxRow;
  /** pending: insertBox has not committed; live; aborted: found abandoned, never to be live; deleting: deleteBox is removing its rows. */
  state: "pending" | "live" | "aborted" | "deleting";
  /** Committed ops not settled yet, oldest first (settled ones are in `op.<box>.<op>`). */
  ops: OpRecord[];
  /** Ops of requests found abandoned (their key claims taken over): never to be committed. */
  aborted: string[];
  /** The revision the entry was created at: the order of boxes made in the same millisecond. */
  order: number;
}

/** `name.<name>` and `opkey.<key>`: who holds the claim. */
interface Claim {
  box: string;
  op?: string;
}

/** What one registry's box side reads and writes besides its own keys (deleteBox removes every row naming the box). */
export interface BoxRows {
  /** Removes the box's policy, owner, shares, schedules and egress log. */
  remove(boxId: string): Promise<void>;
  /** Those rows still there. */
  count(boxId: string): Promise<number>;
  /** Stores a new box's policy and owner (under its id, which nobody knows before it is live). */
  add(boxId: string, policy: BoxPolicy, owner: string | undefined): Promise<void>;
}

const now = () => new Date().toISOString();

export const boxKey = (id: string) => `box.${token(id)}`;
const nameKey = (name: string) => `name.${token(name)}`;
const opKey = (boxId: string, opId: string) => `op.${token(boxId)}.${token(opId)}`;
const idemKey = (key: string) => `opkey.${token(key)}`;

export function toOp(r: OpRecord): Op {
  return {
    id: r.id,
    boxId: r.box_id,
    kind: r.kind,
    status: r.status,
    ...(r.error ? { error: r.error } : {}),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function nameTaken(name: string): HutchError {
  return new HutchError("conflict", `box "${name}" already exists`, `use it, or delete it first: hutch box delete ${name}`, { name });
}

function keyUsed(key: string): HutchError {
  return new HutchError("conflict", `idempotency key ${JSON.stringify(key)} was used for another op`, "retry with a new key", { key });
}

function noBox(boxId: string): HutchError {
  return new HutchError("not_found", `box ${boxId} does not exist`, "list boxes: hutch box list", { boxId });
}

function abandoned(what: string): HutchError {
  return new HutchError(
    "conflict",
    `${what} was taken over by another server, which found it unfinished for too long`,
    "retry; if it keeps happening, raise abandonAfterMs",
  );
}

export class KvBoxRegistry implements Async<BoxRegistry> {
  constructor(
    private readonly kv: Bucket,
    private readonly rows: BoxRows,
    /** How long an unfinished write's claims hold before another writer may take them over. */
    private readonly abandonAfterMs: number,
  ) {}

  async list(): Promise<BoxRow[]> {
    const entries = [...(await this.kv.all<BoxEntry>("box.*")).values()].map((e) => e.value).filter((e) => e.state === "live");
    return entries
      .sort((a, b) => (a.row.created_at < b.row.created_at ? -1 : a.row.created_at > b.row.created_at ? 1 : a.order - b.order))
      .map((e) => e.row);
  }

  async byId(id: string): Promise<BoxRow | null> {
    return (await this.live(id))?.value.row ?? null;
  }

  async byName(name: string): Promise<BoxRow | null> {
    const claim = await this.kv.get<Claim>(nameKey(name));
    if (!claim) return null;
    const row = await this.byId(claim.value.box);
    return row?.name === name ? row : null;
  }

  async find(ref: string): Promise<BoxRow | null> {
    return (await this.byId(ref)) ?? (await this.byName(ref));
  }

  async op(id: string): Promise<Op | null> {
    const [key] = await this.kv.keys(`op.*.${token(id)}`);
    if (!key) return null;
    const record = await this.kv.get<OpRecord>(key);
    return record ? this.committed(record.value) : null;
  }

  async opByKey(key: string): Promise<Op | null> {
    const claim = await this.kv.get<Claim>(idemKey(key));
    if (!claim?.value.op) return null;
    const record = await this.kv.get<OpRecord>(opKey(claim.value.box, claim.value.op));
    return record ? this.committed(record.value) : null;
  }

  async pendingOps(boxId: string): Promise<Op[]> {
    return ((await this.live(boxId))?.value.ops ?? []).map(toOp);
  }

  async insertBox(
    name: string,
    engine: EngineName,
    desired: DesiredState,
    key: string | null,
    config: Record<string, unknown> = {},
    policy: BoxPolicy = { allow: [], bindings: [] },
    owner?: string,
  ): Promise<{ box: BoxRow; op: Op }> {
    const at = now();
    const id = newId("box");
    const row: BoxRow = {
      id,
      name,
      engine,
      state: "creating",
      desired,
      reason: null,
      config: JSON.stringify(config),
      created_at: at,
      updated_at: at,
    };
    const op = newOp(id, "create", key, at);
    const pending: BoxEntry = { row, state: "pending", ops: [op], aborted: [], order: 0 };
    // Nobody knows the new id yet: everything under it is invisible until the entry is live.
    const created = await this.kv.create(boxKey(id), pending);
    if (created === LOST) throw new Error(`box id ${id} is taken`);
    try {
      await this.kv.create(opKey(id, op.id), op);
      await this.rows.add(id, policy, owner);
      if (key !== null) await this.claim(idemKey(key), { box: id, op: op.id }, () => keyUsed(key));
      await this.claim(nameKey(name), { box: id }, () => nameTaken(name));
      // The commit: only a writer that first made this entry "aborted" can have taken a claim of ours, and then this fails.
      const live: BoxEntry = { ...pending, state: "live", order: created };
      if ((await this.kv.write(boxKey(id), live, created)) === LOST) {
        const after = await this.kv.get<BoxEntry>(boxKey(id));
        if (after?.value.state !== "live") throw abandoned(`the creation of box "${name}"`);
      }
      return { box: row, op: toOp(op) };
    } catch (err) {
      if (refused(err)) await this.undoInsert(id, name, key, op.id);
      throw err;
    }
  }

  async request(boxId: string, kind: OpKind, desired: DesiredState, key: string | null): Promise<Op> {
    if (!(await this.live(boxId))) throw noBox(boxId);
    const op = newOp(boxId, kind, key, now());
    await this.kv.create(opKey(boxId, op.id), op);
    try {
      if (key !== null) await this.claim(idemKey(key), { box: boxId, op: op.id }, () => keyUsed(key));
      // The commit: the op joins the box's pending ops with the desired state it asks for, in one compare-and-set.
      for (;;) {
        const e = await this.live(boxId);
        if (!e) throw noBox(boxId);
        if (e.value.ops.some((o) => o.id === op.id)) return toOp(op);
        if (e.value.aborted.includes(op.id)) throw abandoned(`the ${kind} of box ${boxId}`);
        const next: BoxEntry = { ...e.value, row: { ...e.value.row, desired, updated_at: now() }, ops: [...e.value.ops, op] };
        if ((await this.kv.write(boxKey(boxId), next, e.revision)) !== LOST) return toOp(op);
      }
    } catch (err) {
      if (refused(err)) await this.undoRequest(boxId, key, op.id);
      throw err;
    }
  }

  async setState(boxId: string, state: BoxState, reason: string | null = null): Promise<void> {
    await this.change(boxId, (e) => ({ ...e, row: { ...e.row, state, reason, updated_at: now() } }));
  }

  async setConfig(boxId: string, config: Record<string, unknown>): Promise<void> {
    await this.change(boxId, (e) => ({ ...e, row: { ...e.row, config: JSON.stringify(config), updated_at: now() } }));
  }

  async settleOps(boxId: string, error: string | null): Promise<void> {
    for (;;) {
      const e = await this.live(boxId);
      if (!e || e.value.ops.length === 0) return;
      const at = now();
      // Settled records first, then their removal from the entry: an op is always in one of the two.
      for (const op of e.value.ops) await this.settle({ ...op, status: error ? "failed" : "done", error, updated_at: at });
      const settled = new Set(e.value.ops.map((o) => o.id));
      const next: BoxEntry = { ...e.value, ops: e.value.ops.filter((o) => !settled.has(o.id)) };
      if ((await this.kv.write(boxKey(boxId), next, e.revision)) !== LOST) return;
    }
  }

  async deleteBox(boxId: string): Promise<void> {
    // First no write commits on the box any more (each checks it is live), then its rows go, its entry last:
    // a crash on the way leaves the entry, and deleting again finishes.
    let entry: BoxEntry | null = null;
    for (;;) {
      const e = await this.kv.get<BoxEntry>(boxKey(boxId));
      if (!e) break;
      entry = e.value;
      if (e.value.state === "deleting" || (await this.kv.write(boxKey(boxId), { ...e.value, state: "deleting" }, e.revision)) !== LOST)
        break;
    }
    // Claims go before the op records that name their keys, so a crash in between leaves records to find them by.
    const records = await this.kv.all<OpRecord>(`op.${token(boxId)}.*`);
    const ops = [...[...records.values()].map((r) => r.value), ...(entry?.ops ?? [])];
    const keys = new Set(ops.flatMap((o) => (o.idem_key === null ? [] : [o.idem_key])));
    for (const k of keys) await this.release(idemKey(k), boxId);
    if (entry) await this.release(nameKey(entry.row.name), boxId);
    await Promise.all([...records.keys()].map((k) => this.kv.delete(k)));
    await this.rows.remove(boxId);
    for (;;) {
      const e = await this.kv.slot<BoxEntry>(boxKey(boxId));
      if (!e.live || (await this.kv.write(boxKey(boxId), null, e.live.revision)) !== LOST) return;
    }
  }

  async countRows(boxId: string): Promise<number> {
    const [entry, ops, others] = await Promise.all([
      this.kv.get<BoxEntry>(boxKey(boxId)),
      this.kv.keys(`op.${token(boxId)}.*`),
      this.rows.count(boxId),
    ]);
    return (entry ? 1 : 0) + ops.length + others;
  }

  // --- internals ---------------------------------------------------------

  /** The box's entry when it is live. */
  private async live(boxId: string): Promise<Entry<BoxEntry> | null> {
    const e = await this.kv.get<BoxEntry>(boxKey(boxId));
    return e?.value.state === "live" ? e : null;
  }

  /** Compare-and-set on a live box's entry, retried on a lost race; nothing when the box is not live. */
  private async change(boxId: string, fn: (e: BoxEntry) => BoxEntry): Promise<void> {
    for (;;) {
      const e = await this.live(boxId);
      if (!e || (await this.kv.write(boxKey(boxId), fn(e.value), e.revision)) !== LOST) return;
    }
  }

  /**
   * An op as readers may see it: settled records always (only committed ops
   * are settled); a pending one only while its box's entry holds it. Read in
   * that order, so an op settled in between is found in its record.
   */
  private async committed(record: OpRecord): Promise<Op | null> {
    if (record.status !== "pending") return toOp(record);
    const e = await this.live(record.box_id);
    const held = e?.value.ops.find((o) => o.id === record.id);
    if (held) return toOp(held);
    const again = await this.kv.get<OpRecord>(opKey(record.box_id, record.id));
    return again && again.value.status !== "pending" ? toOp(again.value) : null;
  }

  /** Writes an op's settled record over its pending one; one already settled (by another server) stays. */
  private async settle(op: OpRecord): Promise<void> {
    const k = opKey(op.box_id, op.id);
    for (;;) {
      // No record: deleteBox is removing the box, and must not find it back.
      const e = await this.kv.get<OpRecord>(k);
      if (e?.value.status !== "pending") return;
      if ((await this.kv.write(k, op, e.revision)) !== LOST) return;
    }
  }

  /**
   * Takes a create-only claim for `mine`. Held by a committed box or op:
   * refused with `taken()`. Held by a writer still unfinished: refused while
   * it is younger than abandonAfterMs; after that its holder is made unable
   * to commit (compare-and-set on its box's entry), then the claim is taken.
   * Held by nothing live (its holder gone or aborted): taken.
   */
  private async claim(key: string, mine: Claim, taken: () => HutchError): Promise<void> {
    for (;;) {
      const s = await this.kv.slot<Claim>(key);
      if (!s.live) {
        if ((await this.kv.write(key, mine, s.after)) !== LOST) return;
        continue;
      }
      const holder = s.live.value;
      if (holder.box === mine.box && holder.op === mine.op) return;
      const state = await this.holderState(holder);
      if (state === "committed") throw taken();
      if (state === "unfinished") {
        if (Date.now() - s.live.created.getTime() < this.abandonAfterMs) throw taken();
        await this.abort(holder);
        continue;
      }
      if ((await this.kv.write(key, mine, s.live.revision)) === LOST) continue;
      await quietly(() => this.sweep(holder));
      return;
    }
  }

  /**
   * Removes what an abandoned write left once its claim is taken: an aborted
   * insert's op records, rows and entry (it can never be live), or an aborted
   * request's op record.
   */
  private async sweep(holder: Claim): Promise<void> {
    const e = await this.kv.get<BoxEntry>(boxKey(holder.box));
    if (e?.value.state === "aborted") {
      const records = await this.kv.keys(`op.${token(holder.box)}.*`);
      await Promise.all(records.map((k) => this.kv.delete(k)));
      await this.rows.remove(holder.box);
      await this.kv.write(boxKey(holder.box), null, e.revision);
      return;
    }
    if (!holder.op || !e?.value.aborted.includes(holder.op)) return;
    const k = opKey(holder.box, holder.op);
    const record = await this.kv.get<OpRecord>(k);
    if (record?.value.status === "pending") await this.kv.write(k, null, record.revision);
  }

  /** Whether a claim's holder committed, may still, or never will. */
  private async holderState(holder: Claim): Promise<"committed" | "unfinished" | "void"> {
    const e = await this.kv.get<BoxEntry>(boxKey(holder.box));
    if (!e || e.value.state === "aborted" || e.value.state === "deleting") return "void";
    // Only insertBox makes pending entries, so a claim naming one is that insert's.
    if (e.value.state === "pending") return "unfinished";
    if (holder.op === undefined || e.value.ops.some((o) => o.id === holder.op)) return "committed";
    if (e.value.aborted.includes(holder.op)) return "void";
    const record = await this.kv.get<OpRecord>(opKey(holder.box, holder.op));
    if (record && record.value.status !== "pending") return "committed";
    return record ? "unfinished" : "void";
  }

  /** Makes an unfinished holder unable to commit: its pending box aborted, or its op listed as aborted. Lost races are read again by the caller. */
  private async abort(holder: Claim): Promise<void> {
    const e = await this.kv.get<BoxEntry>(boxKey(holder.box));
    if (!e) return;
    if (e.value.state === "pending") {
      await this.kv.write(boxKey(holder.box), { ...e.value, state: "aborted" }, e.revision);
      return;
    }
    if (e.value.state !== "live" || !holder.op || e.value.ops.some((o) => o.id === holder.op)) return;
    await this.kv.write(boxKey(holder.box), { ...e.value, aborted: [...e.value.aborted, holder.op] }, e.revision);
  }

  /** Deletes a claim if it still names `boxId` (and `op` when given). */
  private async release(key: string, boxId: string, op?: string): Promise<void> {
    for (;;) {
      const e = await this.kv.get<Claim>(key);
      if (!e || e.value.box !== boxId || (op !== undefined && e.value.op !== op)) return;
      if ((await this.kv.write(key, null, e.revision)) !== LOST) return;
    }
  }

  /**
   * Undoes an insert that was refused: its claims (where still its own), its
   * create op's record, the rows under its id and its entry. What a crash
   * leaves instead is invisible (never live) and its claims are taken over
   * once abandoned.
   */
  private async undoInsert(id: string, name: string, key: string | null, opId: string): Promise<void> {
    await quietly(async () => {
      await this.release(nameKey(name), id);
      if (key !== null) await this.release(idemKey(key), id, opId);
      await this.kv.delete(opKey(id, opId));
      await this.rows.remove(id);
      const e = await this.kv.get<BoxEntry>(boxKey(id));
      if (e && e.value.state !== "live") await this.kv.write(boxKey(id), null, e.revision);
    });
  }

  /** Undoes a request that was refused before its op was committed: its key claim and its op's record. */
  private async undoRequest(boxId: string, key: string | null, opId: string): Promise<void> {
    await quietly(async () => {
      if ((await this.holderState({ box: boxId, op: opId })) === "committed") return;
      if (key !== null) await this.release(idemKey(key), boxId, opId);
      const k = opKey(boxId, opId);
      const e = await this.kv.get<OpRecord>(k);
      if (e?.value.status === "pending") await this.kv.write(k, null, e.revision);
    });
  }
}

/**
 * A refusal (a taken name, a used key, no such box, taken over): the write
 * did not commit, so it is undone. Anything else (the cluster not answering)
 * may still land: it is left to be found by readers or taken over.
 */
function refused(err: unknown): boolean {
  return !(err instanceof HutchError && err.code === "unavailable");
}

/** An undo the cluster may not let finish: what is left is invisible, and the caller's error says what failed. */
async function quietly(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch {
    // Left for a later writer to take over (see the header).
  }
}

function newOp(boxId: string, kind: OpKind, key: string | null, at: string): OpRecord {
  return { id: newId("op"), box_id: boxId, kind, idem_key: key, status: "pending", error: null, created_at: at, updated_at: at };
}
