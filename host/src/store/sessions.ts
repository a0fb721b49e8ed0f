// Sessions, their event log and their raw PTY bytes. seq is assigned here
// alone, inside the transaction that stores the event, so it is gapless and
// monotonic per session; an idempotency key makes a repeat return the first
// seq and store nothing.
import type { Database, Statement } from "bun:sqlite";
import { SummaryStore } from "./summaries.ts";
import type {
  Appended,
  NewEvent,
  NewSessionRow,
  PtyCaps,
  PtyDrop,
  SessionFields,
  SessionLog,
  SessionRow,
  StoredHook,
  TextPage,
} from "./types.ts";

/** The start of every event line of one session (computed once per page). */
export const eventHead = (session: string) => `{"session":${JSON.stringify(session)},"seq":`;

/**
 * An event's wire JSON from its stored columns, without parsing actor or
 * data (they are stored as JSON). kind is a registered dotted lowercase
 * name and at an ISO time: neither needs escaping.
 */
export const eventLine = (head: string, seq: number, at: string, actor: string, kind: string, data: string) =>
  `${head}${seq},"at":"${at}","actor":${actor},"kind":"${kind}","data":${data}}`;

/** An event's stored columns, as a page reads them. */
interface EventRow {
  seq: number;
  at: string;
  actor: string;
  kind: string;
  data: string;
}

export class SessionStore implements SessionLog {
  private readonly insertEvent: Statement;
  private readonly findIdem: Statement;
  private readonly bumpSeq: Statement;
  private readonly lastSeq: Statement;
  private readonly page: Statement<EventRow, [string, number, number]>;
  /** Each session's folded turn and anchored annotations (written by the stored hooks). */
  readonly summaries: SummaryStore;
  private readonly storedHooks: StoredHook[] = [];

  constructor(private readonly db: Database) {
    this.summaries = new SummaryStore(db);
    this.insertEvent = db.prepare("INSERT INTO events (session_id, seq, at, actor, kind, data, idem_key) VALUES (?, ?, ?, ?, ?, ?, ?)");
    this.findIdem = db.prepare("SELECT seq FROM events WHERE session_id = ? AND idem_key = ?");
    this.bumpSeq = db.prepare("UPDATE sessions SET last_seq = ? WHERE id = ?");
    this.lastSeq = db.prepare("SELECT last_seq FROM sessions WHERE id = ?");
    this.page = db.prepare("SELECT seq, at, actor, kind, data FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?");
  }

  insert(row: NewSessionRow): void {
    this.db
      .query("INSERT INTO sessions (id, box_id, agent, label, state, owner, argv, pty, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
      .run(row.id, row.box_id, row.agent, row.label, row.state, row.owner, row.argv, row.pty, row.created_at);
  }

  get(id: string): SessionRow | null {
    return this.db.query("SELECT * FROM sessions WHERE id = ?").get(id) as SessionRow | null;
  }

  list(filter: { boxId?: string; state?: string } = {}): SessionRow[] {
    const where: string[] = [];
    const args: string[] = [];
    if (filter.boxId) {
      where.push("box_id = ?");
      args.push(filter.boxId);
    }
    if (filter.state) {
      where.push("state = ?");
      args.push(filter.state);
    }
    const sql = `SELECT * FROM sessions ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY created_at, rowid`;
    return this.db.query(sql).all(...args) as SessionRow[];
  }

  /** Open sessions whose driver's lease ran out before `now`. */
  expiredLeases(now: number): SessionRow[] {
    return this.db
      .query("SELECT * FROM sessions WHERE state = 'open' AND driver_expires_at IS NOT NULL AND driver_expires_at < ?")
      .all(now) as SessionRow[];
  }

  update(id: string, fields: SessionFields): void {
    const keys = Object.keys(fields);
    if (keys.length === 0) return;
    const sql = `UPDATE sessions SET ${keys.map((k) => `${k} = ?`).join(", ")} WHERE id = ?`;
    this.db.query(sql).run(...keys.map((k) => (fields as Record<string, string | number | null>)[k] ?? null), id);
  }

  onStored(hook: StoredHook): void {
    this.storedHooks.push(hook);
  }

  /** Appends events in one transaction; returns each one's seq and whether it is new. */
  append(sessionId: string, events: NewEvent[], also?: () => void): Appended[] {
    return this.db
      .transaction(() => {
        let last = (this.lastSeq.get(sessionId) as { last_seq: number } | null)?.last_seq;
        if (last === undefined) throw new Error(`session ${sessionId} does not exist`);
        const head = eventHead(sessionId);
        const out: Appended[] = [];
        for (const e of events) {
          if (e.idempotencyKey) {
            const prior = this.findIdem.get(sessionId, e.idempotencyKey) as { seq: number } | null;
            if (prior) {
              out.push({ seq: prior.seq, fresh: false, json: "" });
              continue;
            }
          }
          const seq = ++last;
          const at = new Date().toISOString();
          const actor = JSON.stringify(e.actor);
          const data = JSON.stringify(e.data);
          this.insertEvent.run(sessionId, seq, at, actor, e.kind, data, e.idempotencyKey ?? null);
          for (const hook of this.storedHooks) hook(sessionId, seq, at, e);
          out.push({ seq, fresh: true, json: eventLine(head, seq, at, actor, e.kind, data) });
        }
        this.bumpSeq.run(last, sessionId);
        also?.();
        return out;
      })
      .immediate();
  }

  /**
   * Stores a batch another writer already numbered (a fleet's log, applied
   * here as its replica): the events as their wire JSON lines, seqs from
   * `first`, with their idempotency keys ([offset in batch, key]). A batch at
   * or before the session's last seq was applied before and is skipped
   * (returns []); one that would leave a gap throws. Runs the stored hooks as
   * append does; returns each stored event's seq, wire JSON and kind.
   */
  applyBatch(
    sessionId: string,
    first: number,
    lines: string[],
    keys: [number, string][] = [],
  ): { seq: number; json: string; kind: string }[] {
    return this.db
      .transaction(() => {
        const last = (this.lastSeq.get(sessionId) as { last_seq: number } | null)?.last_seq;
        if (last === undefined) throw new Error(`session ${sessionId} does not exist`);
        if (first <= last) return [];
        if (first !== last + 1) throw new Error(`session ${sessionId}: a batch from seq ${first} after seq ${last}`);
        const keyAt = new Map(keys);
        const out: { seq: number; json: string; kind: string }[] = [];
        lines.forEach((json, i) => {
          const e = JSON.parse(json) as { seq: number; at: string; actor: NewEvent["actor"]; kind: string; data: unknown };
          if (e.seq !== first + i) throw new Error(`session ${sessionId}: event ${i} of a batch from ${first} has seq ${e.seq}`);
          const key = keyAt.get(i);
          this.insertEvent.run(sessionId, e.seq, e.at, JSON.stringify(e.actor), e.kind, JSON.stringify(e.data), key ?? null);
          const event = { kind: e.kind, data: e.data, actor: e.actor, ...(key ? { idempotencyKey: key } : {}) } as NewEvent;
          for (const hook of this.storedHooks) hook(sessionId, e.seq, e.at, event);
          out.push({ seq: e.seq, json, kind: e.kind });
        });
        this.bumpSeq.run(first + lines.length - 1, sessionId);
        return out;
      })
      .immediate();
  }

  /**
   * Events with seq >= from, at most limit, in order, as their wire JSON
   * joined by `separator`: newlines for a subscription's NDJSON, commas for a
   * JSON page. One string, no object per event: replay runs through here.
   */
  readText(sessionId: string, from: number, limit: number, separator = "\n", maxLength = Number.POSITIVE_INFINITY): TextPage {
    const head = eventHead(sessionId);
    let text = "";
    let count = 0;
    let last = from - 1;
    // Row by row, so a page cut at maxLength reads no further rows off the file.
    for (const r of this.page.iterate(sessionId, from, limit)) {
      text += (count ? separator : "") + eventLine(head, r.seq, r.at, r.actor, r.kind, r.data);
      count++;
      last = r.seq;
      if (text.length >= maxLength) break;
    }
    return { text, count, last };
  }

  /** Events of one kind at or before seq `atMost`, newest first, at most `limit`: stored columns, actor and data still JSON. */
  kindBefore(sessionId: string, kind: string, atMost: number, limit: number): { seq: number; actor: string; data: string }[] {
    return this.db
      .query<{ seq: number; actor: string; data: string }, [string, string, number, number]>(
        "SELECT seq, actor, data FROM events WHERE session_id = ? AND kind = ? AND seq <= ? ORDER BY seq DESC LIMIT ?",
      )
      .all(sessionId, kind, atMost, limit);
  }

  last(sessionId: string): number {
    return (this.lastSeq.get(sessionId) as { last_seq: number } | null)?.last_seq ?? 0;
  }

  /** Stores raw PTY bytes as the next chunk; returns its number. Runs inside append's transaction. */
  addChunk(sessionId: string, data: Uint8Array): number {
    const row = this.db
      .query("UPDATE sessions SET pty_chunks = pty_chunks + 1, pty_bytes = pty_bytes + ? WHERE id = ? RETURNING pty_chunks")
      .get(data.length, sessionId) as { pty_chunks: number };
    const chunk = row.pty_chunks - 1;
    this.db.query("INSERT INTO pty_chunks (session_id, chunk, data) VALUES (?, ?, ?)").run(sessionId, chunk, data);
    return chunk;
  }

  /**
   * Drops the oldest chunks wherever the session's output puts a cap over
   * its limit: its own, then its box's total, then its owner's. A trim goes
   * down to 7/8 of the cap, so a flood costs one drop per eighth of the cap,
   * not one per chunk. Within a box or a user the session holding the most
   * gives its oldest bytes up first: a flood pays for itself before a quiet
   * session loses its history. Runs inside the transaction that added the
   * chunk; the caller logs each drop.
   */
  trimChunks(sessionId: string, caps: PtyCaps): PtyDrop[] {
    const row = this.get(sessionId);
    if (!row) return [];
    const drops: PtyDrop[] = [];
    const scopes: [keyof PtyCaps, string, string][] = [
      ["session", "id = ?", sessionId],
      ["box", "box_id = ?", row.box_id],
      ["user", "owner = ?", row.owner],
    ];
    for (const [cap, where, key] of scopes) {
      const limit = caps[cap];
      if (limit <= 0) continue;
      let total = (this.db.query(`SELECT COALESCE(SUM(pty_bytes), 0) AS n FROM sessions WHERE ${where}`).get(key) as { n: number }).n;
      if (total <= limit) continue;
      const target = limit - Math.floor(limit / 8);
      const biggest = this.db.query(`SELECT id FROM sessions WHERE ${where} AND pty_bytes > 0 ORDER BY pty_bytes DESC, id LIMIT 1`);
      while (total > target) {
        const victim = biggest.get(key) as { id: string } | null;
        const drop = victim && this.dropOldest(victim.id, total - target, cap, limit);
        if (!drop) break;
        drops.push(drop);
        total -= drop.bytes;
      }
    }
    return drops;
  }

  /** Drops a session's oldest chunks, at least `need` bytes of them (all it has when it has less). */
  private dropOldest(sessionId: string, need: number, cap: keyof PtyCaps, limit: number): PtyDrop | null {
    let bytes = 0;
    let fromChunk = -1;
    let toChunk = -1;
    const oldest = this.db.query<{ chunk: number; n: number }, [string]>(
      "SELECT chunk, length(data) AS n FROM pty_chunks WHERE session_id = ? ORDER BY chunk",
    );
    for (const c of oldest.iterate(sessionId)) {
      if (fromChunk < 0) fromChunk = c.chunk;
      toChunk = c.chunk;
      bytes += c.n;
      if (bytes >= need) break;
    }
    if (fromChunk < 0 || bytes === 0) return null;
    this.db.query("DELETE FROM pty_chunks WHERE session_id = ? AND chunk BETWEEN ? AND ?").run(sessionId, fromChunk, toChunk);
    const after = this.db
      .query("UPDATE sessions SET pty_bytes = pty_bytes - ?, pty_dropped = pty_dropped + ? WHERE id = ? RETURNING pty_dropped")
      .get(bytes, bytes, sessionId) as { pty_dropped: number };
    return { sessionId, fromChunk, toChunk, offset: after.pty_dropped - bytes, bytes, cap, limit };
  }

  /** A chunk's bytes; "dropped" when it was stored and dropped to keep under a cap; null when there never was one. */
  chunk(sessionId: string, chunk: number): Uint8Array | "dropped" | null {
    const row = this.db.query("SELECT data FROM pty_chunks WHERE session_id = ? AND chunk = ?").get(sessionId, chunk) as {
      data: Uint8Array;
    } | null;
    if (row) return row.data;
    return chunk < (this.get(sessionId)?.pty_chunks ?? 0) ? "dropped" : null;
  }

  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }
}
