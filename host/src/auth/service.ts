// Users, tokens and who may see what. A token is `hutch_<id>_<secret>`: the id
// finds the row, and only SHA-256 of the 32-byte random secret is stored (a
// secret that long needs no slow hash; GitHub's tokens are kept the same way).
// Revoking a token tells every listener at once, so the daemon closes the
// token's open sockets in the same tick.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import {
  encodeJoin,
  HutchError,
  type JoinToken,
  type ShareInfo,
  type TokenCreateBody,
  type TokenCreated,
  type TokenInfo,
  type TokenScope,
  type UserInfo,
  type UserQuota,
} from "@hutch/shared";
import { AuthStore, LocalAuthWriter } from "../store/auth.ts";
import type { AuthTables, AuthWriter, ShareMode, TokenRow } from "../store/types.ts";
import type { Database } from "bun:sqlite";

/** Who a connection is: a user, what its token lets it do, and the token (remote connections). */
export interface Principal {
  user: string;
  scopes: readonly TokenScope[];
  remote: boolean;
  /** The token's id, never its secret. */
  token?: string;
}

/** What a principal may do with one box: everything (its own), drive it, or only look. */
export type Access = "own" | ShareMode;

const TOKEN = /^hutch_(tok_[0-9a-z]{12})_([0-9A-Za-z_-]{43})$/;
const ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

const sha256 = (s: string) => new Uint8Array(createHash("sha256").update(s).digest());

function tokenId(): string {
  const bytes = randomBytes(12);
  let id = "tok_";
  for (const b of bytes) id += ID_ALPHABET[b % 32];
  return id;
}

/** A token row as the API shows it: never its hash. */
export function toTokenInfo(r: TokenRow): TokenInfo {
  return {
    id: r.id,
    user: r.user,
    scopes: JSON.parse(r.scopes) as TokenScope[],
    createdAt: r.created_at,
    ...(r.expires_at !== null ? { expiresAt: new Date(r.expires_at).toISOString() } : {}),
    ...(r.last_used_at ? { lastUsedAt: r.last_used_at } : {}),
    ...(r.revoked_at ? { revokedAt: r.revoked_at } : {}),
  };
}

/** Told when a user's access to a box narrows (drive to read) or ends: what they still have, or null. */
export type AccessChanged = (boxId: string, user: string, now: ShareMode | null) => void;

export class AuthService {
  readonly store: AuthTables;
  /** How users, tokens, snapshot owners and shares are written (AuthWriter in store/types.ts): this file, or a fleet's registry with this file its replica. */
  readonly writer: AuthWriter;
  private revoked = new Set<(tokenId: string) => void>();
  private narrowed = new Set<AccessChanged>();

  constructor(
    db: Database,
    /** The unix socket's user: owner of every box without an owner row. */
    readonly localUser: string,
    /** The clock expiry is judged by, in ms since the epoch: a test passes its own to expire a token without waiting. */
    private readonly now: () => number = Date.now,
    /** A fleet's writer, made on this server's file (which becomes its replica); this file alone when none. */
    writer?: (store: AuthStore) => AuthWriter,
  ) {
    const store = new AuthStore(db);
    this.store = store;
    this.writer = writer ? writer(store) : new LocalAuthWriter(store);
  }

  /** The unix socket's principal: the daemon's own OS user, with every scope. */
  local(): Principal {
    return { user: this.localUser, scopes: ["read", "write", "admin"], remote: false };
  }

  async addUser(name: string): Promise<UserInfo> {
    // Its boxes and secrets would be the local user's: one name, one owner.
    if (name === this.localUser)
      throw new HutchError("conflict", `"${name}" is this server's own user (the unix socket's)`, "pick another name");
    if (!(await this.writer.addUser(name)))
      throw new HutchError("conflict", `user "${name}" exists`, `make a token for it: hutch token create --user ${name}`);
    return this.store.users().find((u) => u.name === name)!;
  }

  users(): UserInfo[] {
    return this.store.users();
  }

  /** Sets a user's quota; an empty one removes it. */
  async setQuota(name: string, quota: UserQuota): Promise<UserInfo> {
    if (!this.store.hasUser(name)) throw new HutchError("not_found", `no user "${name}"`, "list users: hutch user list");
    await this.writer.setQuota(name, Object.keys(quota).length ? quota : null);
    return this.store.users().find((u) => u.name === name)!;
  }

  /** A new token and the join string that carries it; the secret is in the answer only. */
  async createToken(body: TokenCreateBody, server: { url: string | null; fingerprint: string | null }): Promise<TokenCreated> {
    if (!this.store.hasUser(body.user))
      throw new HutchError("not_found", `no user "${body.user}"`, `add it first: hutch user add ${body.user}`);
    const url = body.url ?? server.url;
    if (!url || !server.fingerprint)
      throw new HutchError("not_ready", "this daemon does not listen on TCP", "start it with: hutch serve --listen 0.0.0.0:8443");
    const id = tokenId();
    const secret = randomBytes(32).toString("base64url");
    const token = `hutch_${id}_${secret}`;
    const expiresAt = body.expiresIn ? this.now() + body.expiresIn * 1000 : null;
    const row = await this.writer.insertToken(id, body.user, sha256(secret), body.scopes ?? ["read", "write"], expiresAt);
    const join: JoinToken = { v: 1, url, fingerprint: server.fingerprint, user: body.user, token };
    return { token: toTokenInfo(row), join: encodeJoin(join) };
  }

  tokens(user?: string): TokenInfo[] {
    return this.store.tokens(user).map(toTokenInfo);
  }

  async revoke(id: string): Promise<TokenInfo> {
    const row = this.store.token(id);
    if (!row) throw new HutchError("not_found", `no token "${id}"`, "list them: hutch token list");
    // In a fleet, the replica tells (tokenRevoked) as it applies the revocation, wherever it was made.
    if ((await this.writer.revoke(id)) && !this.writer.shared) this.tokenRevoked(id);
    return toTokenInfo(this.store.token(id)!);
  }

  /** Tells every listener a token was revoked (its open sockets close). */
  tokenRevoked(id: string): void {
    for (const fn of this.revoked) fn(id);
  }

  /** Calls fn with a token's id when it is revoked; returns the unsubscribe. */
  onRevoke(fn: (tokenId: string) => void): () => void {
    this.revoked.add(fn);
    return () => this.revoked.delete(fn);
  }

  /**
   * The principal an `Authorization` header names, or an unauthorized error
   * whose message says why (never the token). `reason` is for the server log.
   */
  authenticate(header: string | null): Principal {
    const m = header ? /^Bearer (\S+)$/.exec(header) : null;
    if (!m) throw unauthorized("no token", "send Authorization: Bearer <token>; join with: hutch remote add NAME JOIN");
    const parts = TOKEN.exec(m[1]!);
    const row = parts ? this.store.token(parts[1]!) : null;
    if (!parts || !row || !timingSafeEqual(row.hash, sha256(parts[2]!)))
      throw unauthorized("unknown token", "ask the server's admin for a new one: hutch token create --user NAME");
    if (row.revoked_at) throw unauthorized(`token ${row.id} was revoked`, "ask the server's admin for a new one");
    if (row.expires_at !== null && row.expires_at <= this.now())
      throw unauthorized(`token ${row.id} expired at ${new Date(row.expires_at).toISOString()}`, "ask the server's admin for a new one");
    this.store.touch(row.id);
    return { user: row.user, scopes: JSON.parse(row.scopes) as TokenScope[], remote: true, token: row.id };
  }

  /** Whether a token still stands (for open sockets): not revoked, not expired. */
  stillValid(id: string): boolean {
    const row = this.store.token(id);
    return !!row && !row.revoked_at && (row.expires_at === null || row.expires_at > this.now());
  }

  /**
   * What p may do with a box; null: the box is not p's to see (answered as if
   * it did not exist). The local socket sees every box, as Docker's and incus's
   * do; an admin token manages what users share, not their boxes.
   */
  access(p: Principal, boxId: string): Access | null {
    return p.remote ? this.userAccess(p.user, boxId) : "own";
  }

  /** What a user (whatever its token's scopes) may do with a box. */
  userAccess(user: string, boxId: string): Access | null {
    if ((this.store.owner(boxId) ?? this.localUser) === user) return "own";
    return this.store.shareMode(boxId, user);
  }

  async share(boxId: string, user: string, mode: ShareMode): Promise<ShareInfo> {
    if (!this.store.hasUser(user) && user !== this.localUser)
      throw new HutchError("not_found", `no user "${user}"`, "list users: hutch user list");
    const before = this.store.shareMode(boxId, user);
    await this.writer.share(boxId, user, mode);
    if (before === "drive" && mode === "read") this.tellNarrowed(boxId, user, mode);
    return { box: boxId, user, mode };
  }

  async unshare(boxId: string, user: string): Promise<{ box: string; user: string; removed: boolean }> {
    const removed = await this.writer.unshare(boxId, user);
    if (removed) this.tellNarrowed(boxId, user, null);
    return { box: boxId, user, removed };
  }

  /** Calls fn when a user's share of a box narrows or is withdrawn, after the store says so; returns the unsubscribe. */
  onNarrowed(fn: AccessChanged): () => void {
    this.narrowed.add(fn);
    return () => this.narrowed.delete(fn);
  }

  private tellNarrowed(boxId: string, user: string, now: ShareMode | null): void {
    // The owner's own access never narrows through a share row.
    if (this.owner(boxId) === user) return;
    for (const fn of this.narrowed) fn(boxId, user, now);
  }

  shares(boxId: string): ShareInfo[] {
    return this.store.shares(boxId);
  }

  /** Whether p may see a snapshot: its own (the owner of its box when it was taken), or any on the local socket. */
  seesSnapshot(p: Principal, snapId: string): boolean {
    return !p.remote || (this.store.snapshotOwner(snapId) ?? this.localUser) === p.user;
  }

  /** The owner of a box (the local user for boxes without an owner row). */
  owner(boxId: string): string {
    return this.store.owner(boxId) ?? this.localUser;
  }
}

function unauthorized(reason: string, hint: string): HutchError {
  return new HutchError("unauthorized", `not authenticated: ${reason}`, hint);
}
