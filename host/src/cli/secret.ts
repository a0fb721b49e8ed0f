// `hutch secret`: values come from stdin only (never argv, where `ps` and
// shell history would see them); list shows names and bindings, never values.
import { HutchError } from "@hutch/shared/base";
import type { SecretInfo } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type Named = GlobalArgs & { name: string };

async function readStdin(name: string): Promise<string> {
  if (process.stdin.isTTY) {
    throw new HutchError(
      "invalid",
      "hutch secret set reads the value from stdin, and stdin is a terminal",
      `pipe it in: printf %s "$TOKEN" | hutch secret set ${name}`,
    );
  }
  const value = await new Response(Bun.stdin.stream()).text();
  if (value.length === 0)
    throw new HutchError("invalid", "stdin was empty", `pipe the value in: printf %s "$TOKEN" | hutch secret set ${name}`);
  return value;
}

export const secret = body<GlobalArgs>({
  demand: "name a secret command",
  commands: [
    command<Named>({
      command: "set <name>",
      describe: "store a secret read from stdin",
      run: async (a) => {
        const value = await readStdin(a.name);
        const d = await connectDaemon(a.home);
        const info = await d.request<SecretInfo>("PUT", `/v1/secrets/${encodeURIComponent(a.name)}`, { value });
        if (a.json) return printJson(info);
        process.stdout.write(
          `stored ${info.name}${info.bindings.length ? ` (used by ${info.bindings.join(", ")})` : " (no binding uses it yet)"}\n`,
        );
      },
    }),
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "list secret names and the bindings that use them",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const secrets = await d.request<SecretInfo[]>("GET", "/v1/secrets");
        if (a.json) return printJson(secrets);
        process.stdout.write(
          secrets.length === 0
            ? 'no secrets; add one: printf %s "$TOKEN" | hutch secret set anthropic\n'
            : table([["NAME", "BINDINGS", "UPDATED"], ...secrets.map((s) => [s.name, s.bindings.join(",") || "-", s.updatedAt])]),
        );
      },
    }),
    command<Named>({
      command: "rm <name>",
      aliases: ["remove"],
      describe: "remove a secret",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const r = await d.request("DELETE", `/v1/secrets/${encodeURIComponent(a.name)}`);
        if (a.json) return printJson(r);
        process.stdout.write(`removed ${a.name}\n`);
      },
    }),
  ],
});
