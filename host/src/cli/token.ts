// `hutch token`: create prints the join string once (the secret is never shown again), list and revoke by id.
import { HutchError } from "@hutch/shared/base";
import type { TokenCreated, TokenInfo } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type CreateArgs = GlobalArgs & { user: string; scope?: string[]; expires?: string; url?: string };

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** 90d, 12h, 30m, 3600s, or a whole number of seconds. */
export function parseDuration(s: string): number {
  const m = /^(\d+)([smhd]?)$/.exec(s.trim());
  if (!m) throw new HutchError("invalid", `--expires ${s}: expected a duration like 30m, 12h or 90d`, "e.g. --expires 30d");
  return Number(m[1]) * UNITS[m[2] || "s"]!;
}

export const token = body<GlobalArgs>({
  demand: "name a token command",
  commands: [
    command<CreateArgs>({
      command: "create",
      describe: "make a token for a user and print its join string (hand it over; it is shown once)",
      options: {
        user: { type: "string", describe: "the user the token acts as (hutch user add NAME first)" },
        scope: {
          type: "string",
          array: true,
          choices: ["read", "write", "admin"],
          describe: "what it may do (repeatable); default read and write",
        },
        expires: { type: "string", describe: "lifetime: 30m, 12h, 90d; default: until revoked" },
        url: { type: "string", describe: "the address clients use (https://HOST:PORT), when not the listen address" },
      },
      run: async (a) => {
        if (!a.user) throw new HutchError("invalid", "hutch token create needs --user", "e.g. hutch token create --user alice");
        const d = await connectDaemon(a.home);
        const scopes = a.scope?.length ? [...new Set(a.scope)] : undefined;
        const created = await d.request<TokenCreated>("POST", "/v1/tokens", {
          user: a.user,
          ...(scopes ? { scopes } : {}),
          ...(a.expires ? { expiresIn: parseDuration(a.expires) } : {}),
          ...(a.url ? { url: a.url } : {}),
        });
        if (a.json) return printJson(created);
        process.stderr.write(
          `token ${created.token.id} for ${created.token.user} (${created.token.scopes.join(",")})${created.token.expiresAt ? `, expires ${created.token.expiresAt}` : ""}\n` +
            "on the client, join with: hutch remote add NAME - (paste the line below on stdin)\n",
        );
        process.stdout.write(`${created.join}\n`);
      },
    }),
    command<GlobalArgs & { user?: string }>({
      command: "list",
      aliases: ["ls"],
      describe: "list tokens (ids, users, scopes, expiry, last use; never secrets)",
      options: { user: { type: "string", describe: "only this user's" } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const tokens = await d.request<TokenInfo[]>("GET", `/v1/tokens${a.user ? `?user=${encodeURIComponent(a.user)}` : ""}`);
        if (a.json) return printJson(tokens);
        process.stdout.write(
          tokens.length === 0
            ? "no tokens; make one: hutch token create --user NAME\n"
            : table([
                ["ID", "USER", "SCOPES", "EXPIRES", "LAST USED", "REVOKED"],
                ...tokens.map((t) => [t.id, t.user, t.scopes.join(","), t.expiresAt ?? "-", t.lastUsedAt ?? "-", t.revokedAt ?? "-"]),
              ]),
        );
      },
    }),
    command<GlobalArgs & { id: string }>({
      command: "revoke <id>",
      describe: "revoke a token: its requests fail and its open connections close at once",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const t = await d.request<TokenInfo>("POST", `/v1/tokens/${encodeURIComponent(a.id)}/revoke`);
        if (a.json) return printJson(t);
        process.stdout.write(`revoked ${t.id} (${t.user})\n`);
      },
    }),
  ],
});
