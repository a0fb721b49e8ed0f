// Server mode's rows: users, their tokens (only a hash of each secret), who
// owns each box and with whom it is shared, and whose each snapshot is (it
// outlives its box). A box or snapshot with no owner row is the local user's
// (everything made before server mode).
import { settle } from "./settle.ts";
import type { Database } from "bun:sqlite";
import type { ShareInfo, TokenScope, UserInfo, UserQuota } from "@hutch/shared";
import type { AuthTables, AuthWriter, ShareMode, TokenRow } from "./types.ts";

const now = () => new Date().toISOString();

export class AuthStore implements AuthTables {
  constructor(private db: Database) {}

  addUser(name: string): boolean {
    return this.db.query("INSERT OR IGNORE INTO users (name, created_at) VALUES (?, ?)").run(name, now()).changes === 1;
  }

  hasUser(name: string): boolean {
    return this.db.query("SELECT 1 FROM users WHERE name = ?").get(name) !== null;
  }

  users(): UserInfo[] {
    const rows = this.db
      .query(
        "SELECT u.name, u.created_at, u.quota, (SELECT count(*) FROM tokens t WHERE t.user = u.name AND t.revoked_at IS NULL) AS n FROM users u ORDER BY u.name",
      )
      .all() as { name: string; created_at: string; quota: string | null; n: number }[];
    return rows.map((r) => ({
      name: r.name,
      createdAt: r.created_at,
      tokens: r.n,
      ...(r.quota ? { quota: JSON.parse(r.quota) as UserQuota } : {}),
    }));
  }

  quota(name: string): UserQuota | null {
    const row = this.db.query("SELECT quota FROM users WHERE name = ?").get(name) as { quota: string | null } | null;
    return row?.quota ? (JSON.parse(row.quota) as UserQuota) : null;
  }

  setQuota(name: string, quota: UserQuota | null): boolean {
    return this.db.query("UPDATE users SET quota = ? WHERE name = ?").run(quota ? JSON.stringify(quota) : null, name).changes === 1;
  }

  insertToken(id: string, user: string, hash: Uint8Array, scopes: TokenScope[], expiresAt: number | null): TokenRow {
    this.db
      .query("INSERT INTO tokens (id, user, hash, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)")
      .run(id, user, hash, JSON.stringify(scopes), now(), expiresAt);
    return this.token(id)!;
  }

  token(id: string): TokenRow | null {
    return this.db.query("SELECT * FROM tokens WHERE id = ?").get(id) as TokenRow | null;
  }

  tokens(user?: string): TokenRow[] {
    return (
      user
        ? this.db.query("SELECT * FROM tokens WHERE user = ? ORDER BY id").all(user)
        : this.db.query("SELECT * FROM tokens ORDER BY id").all()
    ) as TokenRow[];
  }

  revoke(id: string): boolean {
    return this.db.query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now(), id).changes === 1;
  }

  touch(id: string): void {
    this.db.query("UPDATE tokens SET last_used_at = ? WHERE id = ?").run(now(), id);
  }

  /** The owner of a box; null: the local user's. */
  owner(boxId: string): string | null {
    return (this.db.query("SELECT owner FROM box_owners WHERE box_id = ?").get(boxId) as { owner: string } | null)?.owner ?? null;
  }

  /** The owner of a snapshot (its box's owner when it was taken); null: the local user's. */
  snapshotOwner(snapId: string): string | null {
    return (this.db.query("SELECT owner FROM snapshot_owners WHERE snap_id = ?").get(snapId) as { owner: string } | null)?.owner ?? null;
  }

  setSnapshotOwner(snapId: string, owner: string): void {
    this.db.query("INSERT OR REPLACE INTO snapshot_owners (snap_id, owner) VALUES (?, ?)").run(snapId, owner);
  }

  share(boxId: string, user: string, mode: ShareMode): void {
    this.db.query("INSERT OR REPLACE INTO box_shares (box_id, user, mode) VALUES (?, ?, ?)").run(boxId, user, mode);
  }

  unshare(boxId: string, user: string): boolean {
    return this.db.query("DELETE FROM box_shares WHERE box_id = ? AND user = ?").run(boxId, user).changes === 1;
  }

  shareMode(boxId: string, user: string): ShareMode | null {
    return (
      (this.db.query("SELECT mode FROM box_shares WHERE box_id = ? AND user = ?").get(boxId, user) as { mode: ShareMode } | null)?.mode ??
      null
    );
  }

  // --- a fleet's records, applied as this file is their replica (jetstream/auth-replica.ts) ---

  applyUser(name: string, createdAt: string, quota?: UserQuota | null): void {
    this.db.query("INSERT OR IGNORE INTO users (name, created_at) VALUES (?, ?)").run(name, createdAt);
    if (quota !== undefined) this.setQuota(name, quota);
  }

  /**
   * A token as the fleet stores it; its last use here is kept when the
   * record has none newer. True when this record revoked it (it was live here).
   */
  applyToken(t: TokenRow): boolean {
    const before = this.token(t.id);
    this.applyUser(t.user, t.created_at);
    this.db
      .query(
        `INSERT INTO tokens (id, user, hash, scopes, created_at, expires_at, last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET scopes = excluded.scopes, expires_at = excluded.expires_at, revoked_at = excluded.revoked_at,
           last_used_at = nullif(max(coalesce(last_used_at, ''), coalesce(excluded.last_used_at, '')), '')`,
      )
      .run(t.id, t.user, t.hash, t.scopes, t.created_at, t.expires_at, t.last_used_at, t.revoked_at);
    return !!before && before.revoked_at === null && t.revoked_at !== null;
  }

  applyOwner(boxId: string, owner: string | null): void {
    if (owner === null) this.db.query("DELETE FROM box_owners WHERE box_id = ?").run(boxId);
    else this.db.query("INSERT OR REPLACE INTO box_owners (box_id, owner) VALUES (?, ?)").run(boxId, owner);
  }

  applySnapshotOwner(snapId: string, owner: string | null): void {
    if (owner === null) this.db.query("DELETE FROM snapshot_owners WHERE snap_id = ?").run(snapId);
    else this.setSnapshotOwner(snapId, owner);
  }

  applyShare(boxId: string, user: string, mode: ShareMode | null): void {
    if (mode === null) this.unshare(boxId, user);
    else this.share(boxId, user, mode);
  }

  shares(boxId: string): ShareInfo[] {
    return (
      this.db.query("SELECT box_id, user, mode FROM box_shares WHERE box_id = ? ORDER BY user").all(boxId) as {
        box_id: string;
        user: string;
        mode: ShareMode;
      }[]
    ).map((r) => ({ box: r.box_id, user: r.user, mode: r.mode }));
  }
}

/** The auth service's writer on one machine: this file, written at the call. */
export class LocalAuthWriter implements AuthWriter {
  readonly shared = false;

  constructor(private readonly store: AuthStore) {}

  addUser(name: string): Promise<boolean> {
    return settle(() => this.store.addUser(name));
  }

  setQuota(name: string, quota: UserQuota | null): Promise<boolean> {
    return settle(() => this.store.setQuota(name, quota));
  }

  insertToken(id: string, user: string, hash: Uint8Array, scopes: TokenScope[], expiresAt: number | null): Promise<TokenRow> {
    return settle(() => this.store.insertToken(id, user, hash, scopes, expiresAt));
  }

  revoke(id: string): Promise<boolean> {
    return settle(() => this.store.revoke(id));
  }

  setSnapshotOwner(snapId: string, owner: string): Promise<void> {
    return settle(() => this.store.setSnapshotOwner(snapId, owner));
  }

  share(boxId: string, user: string, mode: ShareMode): Promise<void> {
    return settle(() => this.store.share(boxId, user, mode));
  }

  unshare(boxId: string, user: string): Promise<boolean> {
    return settle(() => this.store.unshare(boxId, user));
  }
}
