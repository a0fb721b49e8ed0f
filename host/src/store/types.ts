// What the daemon keeps, as interfaces: one per kind of state, holding the
// operations its callers use and nothing else. The SQLite classes beside this
// file implement them; a second backend (JetStream) implements them again and
// passes the same contract suites (host/test/contracts/). Where rows must
// commit together (a box and its create op, an event and its session's
// last seq) that is one call here, never two; the session log's three
// exceptions (append's `also`, `transaction`, `onStored`) are named in
// README.md with what replaces them.
//
// SessionLog is synchronous because bun:sqlite is and the daemon calls it so;
// SessionLogAsync is its form for a backend over the network (JetStream),
// which the SQLite log also takes through a thin wrapper. The registry's
// tables have theirs the same way: RegistryAsync, every method Async<…>.
// See README.md.
import type {
  Actor,
  BoxPolicy,
  BoxState,
  DesiredState,
  EgressDecision,
  EgressRecord,
  EngineName,
  Op,
  PoolSpec,
  PoolStatus,
  ShareInfo,
  TokenScope,
  UserQuota,
  TurnState,
  TypedEvent,
  UserInfo,
} from "@hutch/shared";

export type { Backend as SnapshotBackend, ObjectInfo, ObjectKind, Range } from "./snapshot-backend.ts";

// --- Session log -----------------------------------------------------------

export interface SessionRow {
  id: string;
  box_id: string;
  agent: string;
  label: string | null;
  state: "open" | "closed";
  owner: string;
  argv: string;
  pty: string | null;
  driver: string | null;
  driver_lease_ms: number | null;
  driver_expires_at: number | null;
  last_seq: number;
  pty_chunks: number;
  /** Raw terminal bytes stored now (pty_chunks rows), and dropped so far to keep under the caps. */
  pty_bytes: number;
  pty_dropped: number;
  created_at: string;
  closed_at: string | null;
}

/** A new session's row: what the store fills in itself (seqs, chunk counts, the driver slot, closing) left out. */
export type NewSessionRow = Omit<
  SessionRow,
  "last_seq" | "pty_chunks" | "pty_bytes" | "pty_dropped" | "closed_at" | "driver" | "driver_lease_ms" | "driver_expires_at"
>;

/** The fields of a session row that change after it is made. */
export type SessionFields = Partial<Pick<SessionRow, "state" | "pty" | "driver" | "driver_lease_ms" | "driver_expires_at" | "closed_at">>;

/** An event to store: its data typed by its kind (checked again by the session service before it gets here). */
export type NewEvent = TypedEvent & {
  actor: Actor;
  idempotencyKey?: string;
};

/** One appended event: its seq, false when an idempotency key matched an earlier event (nothing stored), and its wire JSON when fresh. */
export interface Appended {
  seq: number;
  fresh: boolean;
  json: string;
}

/** The most raw terminal bytes kept: per session, per box (all its sessions), per user (all theirs); 0 is no cap. */
export interface PtyCaps {
  session: number;
  box: number;
  user: number;
}

/** Chunks dropped from one session's output in one trim: chunks fromChunk..toChunk, `bytes` bytes from byte `offset`. */
export interface PtyDrop {
  sessionId: string;
  fromChunk: number;
  toChunk: number;
  offset: number;
  bytes: number;
  cap: keyof PtyCaps;
  limit: number;
}

/** Runs inside append's transaction for each event it stores, so what it writes commits or rolls back with the event. */
export type StoredHook = (sessionId: string, seq: number, at: string, e: NewEvent) => void;

/** A stored annotation event that is anchored (kept in the session's summary). */
export interface AnchorRow {
  seq: number;
  at: string;
  actor: Actor;
  data: unknown;
}

/** Each session's summary: its folded turn and the seqs of its anchored annotations. Written by a StoredHook. */
export interface SummaryTable {
  /** The session's folded turn, or null when it has no row (a session from before summaries were kept). */
  turn(sessionId: string): TurnState | null;
  /** Replaces the session's turn. */
  setTurn(sessionId: string, turn: TurnState): void;
  /** Marks an event as an anchored annotation. Idempotent. */
  addAnchor(sessionId: string, seq: number): void;
  /** The latest `limit` anchored annotations' events, oldest first. */
  anchors(sessionId: string, limit: number): AnchorRow[];
  /** Every event of these kinds, in seq order (to build a missing summary once). */
  eventsOf(sessionId: string, kinds: readonly string[]): { seq: number; at: string; actor: Actor; kind: string; data: unknown }[];
}

/** A page of a session's events as text: their wire JSON joined, how many, the last seq read (from - 1 when none). */
export interface TextPage {
  text: string;
  count: number;
  last: number;
}
/** readText's arguments: a session, the first seq, at most how many, what joins them, at most how long (see SessionLog.readText). */
export type ReadTextArgs = [sessionId: string, from: number, limit: number, separator?: string, maxLength?: number];

/**
 * Sessions, each one's event log and its raw terminal bytes. The store alone
 * assigns seqs: gapless from 1 and monotonic per session, whichever handle
 * appends; an event with an idempotency key already stored in that session
 * is not stored again and answers with the first one's seq.
 */
export interface SessionLog {
  readonly summaries: SummaryTable;
  /** Stores a new session's row. Throws when the id is taken. */
  insert(row: NewSessionRow): void;
  get(id: string): SessionRow | null;
  /** Sessions matching every given filter, oldest first. */
  list(filter?: { boxId?: string; state?: string }): SessionRow[];
  /** Open sessions whose driver's lease ran out before `now` (ms since the epoch). */
  expiredLeases(now: number): SessionRow[];
  /** Changes the given fields of a session's row; an empty change writes nothing. */
  update(id: string, fields: SessionFields): void;
  /** Adds a hook run for every event stored from now on, in the transaction that stores it. */
  onStored(hook: StoredHook): void;
  /**
   * Appends events to a session, all or none, in order; `also` runs in the
   * same transaction. Returns each event's seq and whether it is new. Throws
   * when the session does not exist.
   */
  append(sessionId: string, events: NewEvent[], also?: () => void): Appended[];
  /**
   * Events with seq >= from, at most limit, in order, as their wire JSON
   * joined by `separator`; `last` is the last seq read (from - 1 when none).
   * With `maxLength`, the page ends at the event that brings its text to that
   * length (so it holds at least one event): a page of large events stays
   * bounded whatever the limit.
   */
  readText(...args: ReadTextArgs): TextPage;
  /** Events of one kind at or before seq `atMost`, newest first, at most `limit`: actor and data as stored JSON. */
  kindBefore(sessionId: string, kind: string, atMost: number, limit: number): { seq: number; actor: string; data: string }[];
  /** The session's last seq; 0 when it has no event or does not exist. */
  last(sessionId: string): number;
  /** Stores raw terminal bytes as the session's next chunk (numbered from 0); returns its number. */
  addChunk(sessionId: string, data: Uint8Array): number;
  /** Drops the oldest chunks wherever a cap is exceeded (down to 7/8 of it); returns what it dropped. */
  trimChunks(sessionId: string, caps: PtyCaps): PtyDrop[];
  /** A chunk's bytes; "dropped" when it was stored and dropped to keep under a cap; null when there never was one. */
  chunk(sessionId: string, chunk: number): Uint8Array | "dropped" | null;
  /** Runs fn so that every write it makes through this log commits together or not at all. */
  transaction<T>(fn: () => T): T;
}

/** What an async append commits with its events, and the state it expects to find. */
export interface AppendOptions {
  /** Changes to the session's row, committed with the events, all or none (the driver slot with its event). */
  fields?: SessionFields;
  /**
   * Compare-and-set: refused with a "conflict" HutchError, nothing stored,
   * unless the session's last seq is this. A writer that read the row
   * (whether the driver slot is free) and decided passes the last seq it read.
   */
  ifLast?: number;
}

/** One stored event: its seq and its wire JSON line. */
export interface StoredLine {
  seq: number;
  json: string;
}

/**
 * The session log for a backend over the network (JetStream): the event log
 * and the session rows of SessionLog, every method returning a promise, and
 * the three hooks that assumed a shared transaction replaced by data (the
 * row change is `AppendOptions.fields`). The same promises as SessionLog:
 * seqs gapless from 1 per session, whichever server appends; an idempotency
 * key stores its event once; a batch with its fields is all or none; what
 * was acknowledged survives a restart. Raw terminal chunks and summaries are
 * not in it yet (they stay on SessionLog, SQLite only). `asyncSessionLog`
 * (session-log-async.ts) gives this form of a SessionLog.
 */
export interface SessionLogAsync {
  /** Stores a new session's row. Rejects when the id is taken. */
  insert(row: NewSessionRow): Promise<void>;
  get(id: string): Promise<SessionRow | null>;
  /** Sessions matching every given filter, oldest first. */
  list(filter?: { boxId?: string; state?: string }): Promise<SessionRow[]>;
  /** Open sessions whose driver's lease ran out before `now` (ms since the epoch). */
  expiredLeases(now: number): Promise<SessionRow[]>;
  /** Changes the given fields of a session's row; an empty change writes nothing. */
  update(id: string, fields: SessionFields): Promise<void>;
  /** Appends events to a session, all or none, in order, with `options.fields`. Rejects when the session does not exist. */
  append(sessionId: string, events: NewEvent[], options?: AppendOptions): Promise<Appended[]>;
  /** As SessionLog.readText. */
  readText(...args: ReadTextArgs): Promise<TextPage>;
  /** As SessionLog.kindBefore. */
  kindBefore(sessionId: string, kind: string, atMost: number, limit: number): Promise<{ seq: number; actor: string; data: string }[]>;
  /** The session's last seq; 0 when it has no event or does not exist. */
  last(sessionId: string): Promise<number>;
  /**
   * Replay, then tail: every event with seq >= from in seq order, then each
   * new one as it is stored (through any handle), until `signal` aborts.
   * Never skips or repeats a seq; resuming from the last seq seen + 1 picks
   * up exactly where a reader left off.
   */
  follow(sessionId: string, from: number, signal: AbortSignal): AsyncIterable<StoredLine>;
}

/**
 * How the session service writes a session: its row, its events with the
 * row change they commit with, and a row change alone. Reads stay on the
 * synchronous SessionLog (this server's SQLite file); a write's promise
 * resolves once the write is durable, readable through that SessionLog and
 * published to the session's live listeners. On one machine it is
 * `LocalWriter` (session-log-async.ts), whose SQLite write runs at the call,
 * before the promise is even returned, so callers that do not wait still see
 * their writes in call order; in a fleet it is `ClusterWriter`
 * (jetstream/replica.ts): JetStream stores the write, and this server's file,
 * its replica, has applied it before the promise resolves.
 */
export interface SessionWriter {
  /** Whether other servers write this log too (a fleet's): then this server runs only its own boxes' sessions. */
  readonly shared: boolean;
  /** Stores a new session's row. Rejects when the id is taken. */
  insert(row: NewSessionRow): Promise<void>;
  /** Appends events, all or none, with `options.fields`; `options.ifLast` as SessionLogAsync's (a stale one rejects, see isStale). */
  append(sessionId: string, events: NewEvent[], options?: AppendOptions): Promise<Appended[]>;
  /** Changes fields of a session's row; an empty change writes nothing. */
  update(id: string, fields: SessionFields): Promise<void>;
  /** Resolves once this server's SessionLog has every write the log had acknowledged when it was called. */
  fresh(): Promise<void>;
}

/** Where a writer publishes each stored event to the session's live listeners (the session bus). */
export type PublishFn = (sessionId: string, seq: number, json: string, kind: string) => void;

// --- Box registry and op journal ------------------------------------------

export interface BoxRow {
  id: string;
  name: string;
  engine: EngineName;
  state: BoxState;
  desired: DesiredState;
  reason: string | null;
  config: string;
  created_at: string;
  updated_at: string;
}

export type OpKind = "create" | "start" | "stop" | "pause" | "resume" | "sleep" | "wake" | "delete";

/** Each box's operations: pending until the reconciler settles them, found again by their idempotency key. */
export interface OpJournal {
  op(id: string): Op | null;
  /** The op recorded with this idempotency key (any box, any status), or null. */
  opByKey(key: string): Op | null;
  /** A box's pending ops, oldest first. */
  pendingOps(boxId: string): Op[];
  /** Settles every pending op of a box: done, or failed with the error. Settled ops are left as they are. */
  settleOps(boxId: string, error: string | null): void;
}

/** Boxes by id and unique name, with their op journal: a write that asks for an op records both at once. */
export interface BoxRegistry extends OpJournal {
  /** Every box, oldest first. */
  list(): BoxRow[];
  byName(name: string): BoxRow | null;
  byId(id: string): BoxRow | null;
  /** A box by id or, failing that, by name. */
  find(ref: string): BoxRow | null;
  /**
   * Stores a new box (state "creating"), its egress policy, its owner when
   * given and its pending create op, all or none. Throws when the name is
   * taken or the idempotency key was used.
   */
  insertBox(
    name: string,
    engine: EngineName,
    desired: DesiredState,
    idemKey: string | null,
    config?: Record<string, unknown>,
    policy?: BoxPolicy,
    owner?: string,
    /** The box's own id when another server of the fleet made it first. */
    givenId?: string,
  ): { box: BoxRow; op: Op };
  /** Sets a box's desired state and records the op asking for it, all or none. */
  request(boxId: string, kind: OpKind, desired: DesiredState, idemKey: string | null): Op;
  setState(boxId: string, state: BoxState, reason?: string | null): void;
  /** Replaces a box's engine settings (limits). */
  setConfig(boxId: string, config: Record<string, unknown>): void;
  /** Removes the box and every row that names it (ops, policy, egress log, owner, shares). Idempotent. */
  deleteBox(boxId: string): void;
  /** Rows anywhere that still name the box (0 after deleteBox). */
  countRows(boxId: string): number;
}

// --- Warm pools -------------------------------------------------------------

/**
 * The warm pools wanted (box/pool.ts): the server's own table, or a fleet's
 * KV bucket, where every server reads the same sizes and keeps its own boxes.
 * A pool is keyed by its engine and image.
 */
export interface PoolSizes {
  /** Every pool wanted, as this server last read them (a fleet's follow the bucket). */
  list(): PoolSpec[];
  /** Sets a pool (replacing its size and limits); resolves once stored. */
  set(spec: PoolSpec): Promise<void>;
  /** Removes a pool; false when there was none. */
  clear(engine: string, image: string): Promise<boolean>;
  /** Calls fn after any pool changes, through this server or another. */
  onChange(fn: () => void): void;
  /** In a fleet: every other server's pools as it last reported them; this server reports its own with `report`. */
  elsewhere?(): Promise<PoolStatus[]>;
  report?(pools: PoolStatus[]): Promise<void>;
  close?(): Promise<void>;
}

// --- Users, tokens, owners, shares ----------------------------------------

export interface TokenRow {
  id: string;
  user: string;
  hash: Uint8Array;
  scopes: string;
  created_at: string;
  expires_at: number | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

export type ShareMode = ShareInfo["mode"];

export interface UserTable {
  /** Adds a user; false (nothing written) when the name is taken. */
  addUser(name: string): boolean;
  hasUser(name: string): boolean;
  /** Every user by name, with their count of unrevoked tokens and their quota. */
  users(): UserInfo[];
  /** A user's quota; null when they have none (or do not exist). */
  quota(name: string): UserQuota | null;
  /** Sets a user's quota (null: none); false when the user does not exist. */
  setQuota(name: string, quota: UserQuota | null): boolean;
}

/** API tokens: only a hash of each secret is kept. */
export interface TokenTable {
  /** Stores a token of an existing user; throws when the id is taken or the user does not exist. */
  insertToken(id: string, user: string, hash: Uint8Array, scopes: TokenScope[], expiresAt: number | null): TokenRow;
  token(id: string): TokenRow | null;
  /** Every token (of one user when given), by id. */
  tokens(user?: string): TokenRow[];
  /** Revokes a token; false when it does not exist or was revoked already (the first revocation's time stays). */
  revoke(id: string): boolean;
  /** Records that the token was just used. */
  touch(id: string): void;
}

/** Who owns each box and each snapshot (outliving its box); no row: the local user's. */
export interface OwnerTable {
  owner(boxId: string): string | null;
  snapshotOwner(snapId: string): string | null;
  setSnapshotOwner(snapId: string, owner: string): void;
}

/** Who else may use a box, and how. */
export interface ShareTable {
  /** Shares a box with a user, replacing any earlier mode. */
  share(boxId: string, user: string, mode: ShareMode): void;
  /** False when there was no share. */
  unshare(boxId: string, user: string): boolean;
  shareMode(boxId: string, user: string): ShareMode | null;
  /** A box's shares, by user. */
  shares(boxId: string): ShareInfo[];
}

/** What the auth service keeps. */
export interface AuthTables extends UserTable, TokenTable, OwnerTable, ShareTable {}

/**
 * How the auth service writes users, tokens, snapshot owners and shares;
 * reads stay on the synchronous AuthTables (this server's file). On one
 * machine, `LocalAuthWriter` (auth.ts) writes the file at the call; in a
 * fleet, `FleetAuthWriter` (jetstream/auth-replica.ts) writes the registry's
 * bucket and resolves once this server's file, its replica, shows the write.
 * A token's last use (`touch`) is not here: it stays on the server that saw it.
 */
export interface AuthWriter {
  /** Whether other servers write these rows too (a fleet's). */
  readonly shared: boolean;
  addUser(name: string): Promise<boolean>;
  setQuota(name: string, quota: UserQuota | null): Promise<boolean>;
  insertToken(id: string, user: string, hash: Uint8Array, scopes: TokenScope[], expiresAt: number | null): Promise<TokenRow>;
  revoke(id: string): Promise<boolean>;
  setSnapshotOwner(snapId: string, owner: string): Promise<void>;
  share(boxId: string, user: string, mode: ShareMode): Promise<void>;
  unshare(boxId: string, user: string): Promise<boolean>;
}

/** A fleet's users, tokens and shares: their writer, and who is told of each revocation the replica applies. */
export interface FleetAuth {
  writer: AuthWriter;
  onRevoked(fn: (tokenId: string) => void): void;
}

// --- The broker's rows ------------------------------------------------------

/** Decisions kept per box for `hutch box egress`; older ones are dropped as new ones arrive. */
export const EGRESS_KEPT = 1000;

export interface PolicyRow {
  allow: string[];
  bindings: string[];
  stubs: Record<string, string>;
  /** What a host off the allowlist gets: refused, or held for a person's approval. */
  unlisted?: "deny" | "ask";
  /** How long this box's approvals wait (null/absent: the default). */
  approvalMs?: number | null;
}

/** Sealed secrets (never in clear), each box's egress policy and a bounded log of its egress decisions. */
export interface BrokerTables {
  /** Stores a sealed secret, replacing one of the same name. */
  setSecret(name: string, sealed: Uint8Array): void;
  sealed(name: string): Uint8Array | undefined;
  /** Every secret's name and times (never its value), by name. */
  secrets(): { name: string; createdAt: string; updatedAt: string }[];
  /** False when there was no such secret. */
  removeSecret(name: string): boolean;
  /** A box's policy; an empty one when it has none. */
  policy(boxId: string): PolicyRow;
  savePolicy(boxId: string, p: PolicyRow): void;
  /** Logs a decision. A box keeps its latest EGRESS_KEPT at least, and at most a tenth more: older ones go. */
  logEgress(boxId: string, record: EgressRecord): void;
  /** A box's latest `limit` decisions (of one kind when given), oldest first. */
  egress(boxId: string, decision: EgressDecision | undefined, limit: number): EgressRecord[];
}

// --- Schedules --------------------------------------------------------------

export interface ScheduleRow {
  id: string;
  box_id: string;
  owner: string;
  agent: string;
  prompt: string;
  /** The cron expression, or null for a one-off. */
  cron: string | null;
  /** A one-off's time, ms since the epoch. */
  at: number | null;
  max_run_ms: number;
  catch_up: "once" | "skip";
  /** Added to every cron time of this schedule (from a hash of its box's id). */
  spread_ms: number;
  state: "active" | "paused" | "done";
  /** When it runs next, ms since the epoch; null when paused or done. */
  next_at: number | null;
  /** The latest run (a ScheduleRun as JSON), or null. */
  last_run: string | null;
  runs: number;
  skipped: number;
  created_at: string;
}

/** The fields of a schedule that change after it is made. */
export type ScheduleFields = Partial<Pick<ScheduleRow, "state" | "next_at" | "last_run" | "runs" | "skipped">>;

/** Schedules by id; a box's go with it (BoxRegistry.deleteBox). */
export interface ScheduleTable {
  /** Throws when the id is taken. */
  insertSchedule(row: ScheduleRow): void;
  schedule(id: string): ScheduleRow | null;
  /** Schedules matching every given filter, oldest first. */
  schedules(filter?: { owner?: string; boxId?: string }): ScheduleRow[];
  /** Active schedules whose next run is at or before `now`, soonest first. */
  dueSchedules(now: number): ScheduleRow[];
  /** Changes the given fields; false when there is no such schedule. */
  updateSchedule(id: string, fields: ScheduleFields): boolean;
  /**
   * Moves an active schedule's next run from `from` to `to` with its other
   * changes, only if its next run is still `from` (compare-and-set): of two
   * servers that saw the same due run, one fires it.
   */
  claimRun(id: string, from: number, to: number | null, fields: ScheduleFields): boolean;
  /** False when there was no such schedule. */
  removeSchedule(id: string): boolean;
}

// --- The registry, and its async form ---------------------------------------

/** The registry: boxes and their ops, auth, the broker's rows and schedules, on one storage (a box's rows go with it). */
export interface Registry {
  boxes: BoxRegistry;
  auth: AuthTables;
  broker: BrokerTables;
  schedules: ScheduleTable;
}

/**
 * An interface's form for a backend over the network: every method takes the
 * same arguments and returns a promise of what it returned (a throw becomes a
 * rejection). The promises are the same as the sync method's doc says.
 */
export type Async<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<Awaited<R>> : T[K];
};

/**
 * The registry on a backend over the network (JetStream KV,
 * jetstream/registry.ts): each table Async. The SQLite tables take this form
 * through `asyncRegistry` (registry-async.ts).
 */
export type RegistryAsync = { [K in keyof Registry]: Async<Registry[K]> };
