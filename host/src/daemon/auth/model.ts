// Request and response schemas of the users, tokens and shares controller (TypeBox, from shared).
import { t } from "elysia";
import {
  ShareBody,
  ShareInfo,
  TokenCreateBody,
  TokenCreated,
  TokenId,
  TokenInfo,
  UserAddBody,
  UserInfo,
  UserName,
  UserQuota,
  WhoAmI,
} from "@hutch/shared";

export const AuthModel = {
  whoami: WhoAmI,
  userAdd: UserAddBody,
  user: UserInfo,
  users: t.Array(UserInfo),
  userName: t.Object({ name: UserName }),
  quota: UserQuota,
  tokenCreate: TokenCreateBody,
  tokenCreated: TokenCreated,
  token: TokenInfo,
  tokens: t.Array(TokenInfo),
  tokenId: t.Object({ id: TokenId }),
  tokenQuery: t.Object({ user: t.Optional(UserName) }),
  ref: t.Object({ ref: t.String({ minLength: 1, maxLength: 128 }) }),
  refUser: t.Object({ ref: t.String({ minLength: 1, maxLength: 128 }), user: UserName }),
  share: ShareBody,
  shareInfo: ShareInfo,
  shares: t.Array(ShareInfo),
  unshared: t.Object({ box: t.String(), user: t.String(), removed: t.Boolean() }),
};
