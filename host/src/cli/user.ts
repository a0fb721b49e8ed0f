// `hutch user`: server mode's users, kept by the daemon (on the server's own socket, or with an admin token).
import type { UserInfo } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type Named = GlobalArgs & { name: string };

export const user = body<GlobalArgs>({
  demand: "name a user command",
  commands: [
    command<Named>({
      command: "add <name>",
      describe: "add a user (lower case); then give them a token: hutch token create --user NAME",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const u = await d.request<UserInfo>("POST", "/v1/users", { name: a.name });
        if (a.json) return printJson(u);
        process.stdout.write(`added user ${u.name}; give them a token: hutch token create --user ${u.name}\n`);
      },
    }),
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "list users and how many live tokens each has",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const users = await d.request<UserInfo[]>("GET", "/v1/users");
        if (a.json) return printJson(users);
        process.stdout.write(
          users.length === 0
            ? "no users; add one: hutch user add alice\n"
            : table([["NAME", "TOKENS", "CREATED"], ...users.map((u) => [u.name, String(u.tokens), u.createdAt])]),
        );
      },
    }),
  ],
});
