// Server mode's wire shapes: users, tokens, shares, the join string a token is
// handed out as, and the close code that ends a revoked token's sockets. The
// daemon checks requests against these; the CLI and the extension read answers
// through the same types.
import { type Static, Type } from "@sinclair/typebox";

/** Where a token is sent: `Authorization: Bearer <token>` on every request and WebSocket upgrade. */
export const AUTH_HEADER = "authorization";

/** A server's user: lowercase, like a Unix login. */
export const UserName = Type.String({
  pattern: "^[a-z][a-z0-9_-]{0,31}$",
  title: "user name",
  description: "lowercase letters, digits, '_' and '-'",
  rule: "use lowercase letters, digits, '_' and '-', starting with a letter (at most 32)",
});
export type UserName = Static<typeof UserName>;

/**
 * What a token may do. `read`: look (GETs, watch, subscribe). `write`: use the
 * user's own boxes, sessions and secrets, and the server's images and agent
 * CLIs. `admin`: manage what every user shares (images, agent CLIs, users,
 * tokens) and see every user's things.
 */
export const TOKEN_SCOPES = ["read", "write", "admin"] as const;
export const TokenScope = Type.Union([Type.Literal("read"), Type.Literal("write"), Type.Literal("admin")]);
export type TokenScope = Static<typeof TokenScope>;

export const UserAddBody = Type.Object({ name: UserName }, { additionalProperties: false });
export type UserAddBody = Static<typeof UserAddBody>;

/**
 * What a user may hold at once, across the server (or the whole fleet): boxes,
 * and the vCPUs and memory those boxes are given (a box without a CPU limit
 * counts as 1 vCPU; without a memory limit, as 512 MiB). No field: no limit.
 */
export const UserQuota = Type.Object(
  {
    boxes: Type.Optional(Type.Integer({ minimum: 0, maximum: 100000 })),
    cpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000000 })),
    memoryMiB: Type.Optional(Type.Integer({ minimum: 0, maximum: 1073741824 })),
  },
  { additionalProperties: false },
);
export type UserQuota = Static<typeof UserQuota>;

export const UserInfo = Type.Object({
  name: UserName,
  createdAt: Type.String(),
  tokens: Type.Integer({ minimum: 0 }),
  quota: Type.Optional(UserQuota),
});
export type UserInfo = Static<typeof UserInfo>;

/** A token's public id; the secret part is never stored or shown again. */
export const TokenId = Type.String({ pattern: "^tok_[0-9a-z]{12}$", title: "token id", rule: "tok_ and 12 lowercase letters or digits" });

export const TokenCreateBody = Type.Object(
  {
    user: UserName,
    scopes: Type.Optional(Type.Array(TokenScope, { minItems: 1, maxItems: 3, uniqueItems: true })),
    /** Lifetime in seconds; none: it lasts until revoked. */
    expiresIn: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 * 365 * 86_400 })),
    /** The address clients should use, put into the join string; the daemon's listen address when absent. */
    url: Type.Optional(Type.String({ pattern: "^https://[^\\s/]+$", maxLength: 300, rule: "https://HOST[:PORT], with no path" })),
  },
  { additionalProperties: false },
);
export type TokenCreateBody = Static<typeof TokenCreateBody>;

export const TokenInfo = Type.Object({
  id: TokenId,
  user: UserName,
  scopes: Type.Array(TokenScope),
  createdAt: Type.String(),
  expiresAt: Type.Optional(Type.String()),
  lastUsedAt: Type.Optional(Type.String()),
  revokedAt: Type.Optional(Type.String()),
});
export type TokenInfo = Static<typeof TokenInfo>;

/**
 * What a client needs to join a server, as incus's trust tokens carry it: the
 * addresses, the certificate's SHA-256 fingerprint (pinned, so no trust prompt)
 * and the secret. Encoded as base64url JSON (`encodeJoin`).
 */
export const JoinToken = Type.Object(
  {
    v: Type.Literal(1),
    url: Type.String({ pattern: "^https://[^\\s/]+$", maxLength: 300, rule: "https://HOST[:PORT], with no path" }),
    fingerprint: Type.String({ pattern: "^[0-9a-f]{64}$", rule: "64 lowercase hex digits" }),
    user: UserName,
    token: Type.String({
      pattern: "^hutch_tok_[0-9a-z]{12}_[0-9A-Za-z_-]{43}$",
      rule: "a hutch token (hutch_tok_…), as printed by hutch token create",
    }),
  },
  { additionalProperties: false },
);
export type JoinToken = Static<typeof JoinToken>;

export const TokenCreated = Type.Object({ token: TokenInfo, join: Type.String() });
export type TokenCreated = Static<typeof TokenCreated>;

export const SHARE_MODES = ["read", "drive"] as const;
/** `read`: watch and annotate its sessions. `drive`: also exec, attach, send, start and stop; never delete or re-share. */
export const ShareMode = Type.Union([Type.Literal("read"), Type.Literal("drive")]);
export const ShareBody = Type.Object({ user: UserName, mode: ShareMode }, { additionalProperties: false });
export type ShareBody = Static<typeof ShareBody>;
export const ShareInfo = Type.Object({ box: Type.String(), user: UserName, mode: ShareMode });
export type ShareInfo = Static<typeof ShareInfo>;

/** Who this connection is, as the daemon sees it (`GET /v1/whoami`). */
export const WhoAmI = Type.Object({ user: Type.String(), scopes: Type.Array(TokenScope), remote: Type.Boolean() });
export type WhoAmI = Static<typeof WhoAmI>;

/** A WebSocket closed because its token was revoked or expired while it was open. */
export const WS_CLOSE_UNAUTHORIZED = 4401;
/** A WebSocket closed because its user's share of the box narrowed or was withdrawn while it was open. */
export const WS_CLOSE_DENIED = 4403;

/** base64url(JSON) of a join token. */
export function encodeJoin(j: JoinToken): string {
  return btoa(JSON.stringify(j)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The JSON a join string carries, not yet checked against JoinToken; null when it is not base64url JSON at all. */
export function decodeJoin(s: string): unknown {
  const text = s.trim();
  if (!/^[A-Za-z0-9_-]{16,4096}$/.test(text)) return null;
  try {
    return JSON.parse(atob(text.replaceAll("-", "+").replaceAll("_", "/")));
  } catch {
    return null;
  }
}

/** One server of a remote: where it listens and its pinned certificate (PEM) with its fingerprint. */
export const RemoteServer = Type.Object(
  {
    url: JoinToken.properties.url,
    fingerprint: JoinToken.properties.fingerprint,
    cert: Type.String({ maxLength: 65_536 }),
    addedAt: Type.String(),
  },
  { additionalProperties: false },
);
export type RemoteServer = Static<typeof RemoteServer>;

/** How many servers one remote may list. */
export const REMOTE_SERVERS_MAX = 16;

/**
 * One remote a client keeps: its servers (one, or several of one fleet, each
 * with its own pinned certificate), the user and the token (a fleet's token
 * works on every server of it), and the server that answered last (`active`:
 * its URL), which the client tries first.
 */
export const RemoteEntry = Type.Object(
  {
    servers: Type.Array(RemoteServer, { minItems: 1, maxItems: REMOTE_SERVERS_MAX }),
    active: Type.Optional(JoinToken.properties.url),
    user: UserName,
    token: JoinToken.properties.token,
    addedAt: Type.String(),
  },
  { additionalProperties: false },
);
export type RemoteEntry = Static<typeof RemoteEntry>;

/**
 * A remote as files before a remote could list several servers kept it: its
 * one server's fields beside the token. `readRemotes` reads it as a remote of
 * one server.
 */
export interface LegacyRemoteEntry {
  url: string;
  fingerprint: string;
  cert: string;
  user: string;
  token: string;
  addedAt: string;
}

/** A legacy entry as a remote of one server; anything else as it was (checked after). */
export function upgradeRemoteEntry(e: unknown): unknown {
  if (typeof e !== "object" || e === null || "servers" in e || !("url" in e)) return e;
  const { url, fingerprint, cert, user, token, addedAt, ...rest } = e as LegacyRemoteEntry;
  return { servers: [{ url, fingerprint, cert, addedAt }], user, token, addedAt, ...rest };
}

/** A remote's name: what `--remote NAME` says. `local` is the home's own daemon. */
export const RemoteName = Type.String({
  pattern: "^[a-z][a-z0-9_-]{0,31}$",
  title: "remote name",
  rule: "use lowercase letters, digits, '_' and '-', starting with a letter (at most 32)",
});

/** The client's remotes file (`$XDG_CONFIG_HOME/hutch/remotes.json`, 0600). */
export const RemotesFile = Type.Object(
  { default: Type.Optional(RemoteName), remotes: Type.Record(Type.String(), RemoteEntry) },
  { additionalProperties: false },
);
export type RemotesFile = Static<typeof RemotesFile>;
