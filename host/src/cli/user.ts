// `hutch user`: server mode's users, kept by the daemon (on the server's own socket, or with an admin token).
import { HutchError } from "@hutch/shared/base";
import type { UserInfo, UserQuota } from "@hutch/shared";
import { parseMemory } from "./box.ts";
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
            : table([
                ["NAME", "TOKENS", "QUOTA", "CREATED"],
                ...users.map((u) => [u.name, String(u.tokens), quotaText(u.quota), u.createdAt]),
              ]),
        );
      },
    }),
    command<Named & { boxes?: number; cpus?: number; memory?: string; clear: boolean }>({
      command: "quota <name>",
      describe: "limit what a user may hold at once (across the fleet, in one): boxes, vCPUs, memory; --clear removes the limit",
      options: {
        boxes: { type: "number", describe: "boxes at once" },
        cpus: { type: "number", describe: "vCPUs their boxes are given in all (a box without a CPU limit counts 1)" },
        memory: { type: "string", describe: "memory their boxes are given in all, e.g. 8G (a box without a limit counts 512M)" },
        clear: { type: "boolean", default: false, describe: "remove the quota" },
      },
      run: async (a) => {
        const quota: UserQuota = a.clear
          ? {}
          : {
              ...(a.boxes !== undefined ? { boxes: a.boxes } : {}),
              ...(a.cpus !== undefined ? { cpus: a.cpus } : {}),
              ...(a.memory !== undefined ? { memoryMiB: parseMemory(a.memory) } : {}),
            };
        if (!a.clear && Object.keys(quota).length === 0)
          throw new HutchError("invalid", "no limit given", `e.g. hutch user quota ${a.name} --boxes 3 (or --clear)`);
        const d = await connectDaemon(a.home);
        const u = await d.request<UserInfo>("PUT", `/v1/users/${encodeURIComponent(a.name)}/quota`, quota);
        if (a.json) return printJson(u);
        process.stdout.write(`${u.name}: ${quotaText(u.quota)}\n`);
      },
    }),
  ],
});

function quotaText(q: UserQuota | undefined): string {
  if (!q) return "none";
  const parts = [
    q.boxes !== undefined ? `${q.boxes} box${q.boxes === 1 ? "" : "es"}` : "",
    q.cpus !== undefined ? `${q.cpus} vCPU${q.cpus === 1 ? "" : "s"}` : "",
    q.memoryMiB !== undefined ? `${q.memoryMiB} MiB` : "",
  ].filter(Boolean);
  return parts.length ? parts.join(", ") : "none";
}
