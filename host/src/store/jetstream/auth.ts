// Users, tokens, owners and shares on the registry's KV bucket, one key each:
// `user.<name>`, `token.<id>` (only the hash of its secret, as on SQLite),
// `owner.<box>`, `snapowner.<snap>`, `share.<box>.<user>`. A token's
// revocation and use are compare-and-set on its revision, so a touch never
// undoes a revocation stored meanwhile.
import { HutchError, type ShareInfo, type TokenScope, type UserInfo, type UserQuota } from "@hutch/shared";
import type { AuthTables, Async, ShareMode, TokenRow } from "../types.ts";
import { type Bucket, LOST, token } from "./kv.ts";

/** A user as stored. */
type UserRecord = { name: string; created_at: string; quota?: UserQuota };

/** A token as stored: its row with the hash in base64. */
type TokenRecord = Omit<TokenRow, "hash"> & { hash: string };

const now = () => new Date().toISOString();

export const ownerKey = (boxId: string) => `owner.${token(boxId)}`;
export const sharesOf = (boxId: string) => `share.${token(boxId)}.*`;
const shareKey = (boxId: string, user: string) => `share.${token(boxId)}.${token(user)}`;
const userKey = (name: string) => `user.${token(name)}`;
const tokenKey = (id: string) => `token.${token(id)}`;

function toRow(r: TokenRecord): TokenRow {
  return { ...r, hash: new Uint8Array(Buffer.from(r.hash, "base64")) };
}

export class KvAuthTables implements Async<AuthTables> {
  constructor(private readonly kv: Bucket) {}

  async addUser(name: string): Promise<boolean> {
    return (await this.kv.create(userKey(name), { name, created_at: now() })) !== LOST;
  }

  async quota(name: string): Promise<UserQuota | null> {
    return (await this.kv.get<UserRecord>(userKey(name)))?.value.quota ?? null;
  }

  async setQuota(name: string, quota: UserQuota | null): Promise<boolean> {
    for (;;) {
      const e = await this.kv.get<UserRecord>(userKey(name));
      if (!e) return false;
      const { quota: _, ...rest } = e.value;
      if ((await this.kv.write(userKey(name), quota ? { ...rest, quota } : rest, e.revision)) !== LOST) return true;
    }
  }

  async hasUser(name: string): Promise<boolean> {
    return (await this.kv.get(userKey(name))) !== null;
  }

  async users(): Promise<UserInfo[]> {
    const [users, tokens] = await Promise.all([this.kv.all<UserRecord>("user.*"), this.kv.all<TokenRecord>("token.*")]);
    const live = new Map<string, number>();
    for (const t of tokens.values()) if (t.value.revoked_at === null) live.set(t.value.user, (live.get(t.value.user) ?? 0) + 1);
    return [...users.values()]
      .map((u) => ({
        name: u.value.name,
        createdAt: u.value.created_at,
        tokens: live.get(u.value.name) ?? 0,
        ...(u.value.quota ? { quota: u.value.quota } : {}),
      }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async insertToken(id: string, user: string, hash: Uint8Array, scopes: TokenScope[], expiresAt: number | null): Promise<TokenRow> {
    if (!(await this.hasUser(user))) throw new HutchError("not_found", `user ${user} does not exist`, "add the user first: hutch user add");
    const record: TokenRecord = {
      id,
      user,
      hash: Buffer.from(hash).toString("base64"),
      scopes: JSON.stringify(scopes),
      created_at: now(),
      expires_at: expiresAt,
      last_used_at: null,
      revoked_at: null,
    };
    if ((await this.kv.create(tokenKey(id), record)) === LOST)
      throw new HutchError("conflict", `token id ${id} is taken`, "make the token again");
    return toRow(record);
  }

  async token(id: string): Promise<TokenRow | null> {
    const e = await this.kv.get<TokenRecord>(tokenKey(id));
    return e ? toRow(e.value) : null;
  }

  async tokens(user?: string): Promise<TokenRow[]> {
    return [...(await this.kv.all<TokenRecord>("token.*")).values()]
      .map((e) => e.value)
      .filter((t) => user === undefined || t.user === user)
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map(toRow);
  }

  async revoke(id: string): Promise<boolean> {
    for (;;) {
      const e = await this.kv.get<TokenRecord>(tokenKey(id));
      if (!e || e.value.revoked_at !== null) return false;
      if ((await this.kv.write(tokenKey(id), { ...e.value, revoked_at: now() }, e.revision)) !== LOST) return true;
    }
  }

  async touch(id: string): Promise<void> {
    for (;;) {
      const e = await this.kv.get<TokenRecord>(tokenKey(id));
      if (!e || (await this.kv.write(tokenKey(id), { ...e.value, last_used_at: now() }, e.revision)) !== LOST) return;
    }
  }

  async owner(boxId: string): Promise<string | null> {
    return (await this.kv.get<{ owner: string }>(ownerKey(boxId)))?.value.owner ?? null;
  }

  async snapshotOwner(snapId: string): Promise<string | null> {
    return (await this.kv.get<{ owner: string }>(`snapowner.${token(snapId)}`))?.value.owner ?? null;
  }

  async setSnapshotOwner(snapId: string, owner: string): Promise<void> {
    await this.kv.put(`snapowner.${token(snapId)}`, { owner });
  }

  async share(boxId: string, user: string, mode: ShareMode): Promise<void> {
    await this.kv.put(shareKey(boxId, user), { user, mode });
  }

  async unshare(boxId: string, user: string): Promise<boolean> {
    for (;;) {
      const e = await this.kv.get(shareKey(boxId, user));
      if (!e) return false;
      if ((await this.kv.write(shareKey(boxId, user), null, e.revision)) !== LOST) return true;
    }
  }

  async shareMode(boxId: string, user: string): Promise<ShareMode | null> {
    return (await this.kv.get<{ mode: ShareMode }>(shareKey(boxId, user)))?.value.mode ?? null;
  }

  async shares(boxId: string): Promise<ShareInfo[]> {
    return [...(await this.kv.all<{ user: string; mode: ShareMode }>(sharesOf(boxId))).values()]
      .map((e) => ({ box: boxId, user: e.value.user, mode: e.value.mode }))
      .sort((a, b) => (a.user < b.user ? -1 : a.user > b.user ? 1 : 0));
  }
}
