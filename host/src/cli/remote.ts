// `hutch remote`: the servers this client joins. The join string carries a
// token, so it is read from stdin when given as `-` (or left out), never
// needing to sit in argv where `ps` and shell history see it.
import type { RemoteListRow } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type AddArgs = GlobalArgs & { name: string; join?: string; force: boolean };

async function readJoin(arg: string | undefined): Promise<string> {
  if (arg !== undefined && arg !== "-") return arg;
  let text = "";
  if (process.stdin.isTTY) {
    process.stderr.write("paste the join string, then Enter: ");
    for await (const line of console) {
      text = line;
      break;
    }
  } else text = await new Response(Bun.stdin.stream()).text();
  if (!text.trim())
    throw new HutchError("invalid", "no join string on stdin", "pipe it in: hutch token create --user NAME | hutch remote add NAME -");
  return text.trim();
}

export const remote = body<GlobalArgs>({
  demand: "name a remote command",
  commands: [
    command<AddArgs>({
      command: "add <name> [join]",
      describe: "join a server with the join string from its hutch token create (- or none: read it from stdin); pins its certificate",
      options: { force: { type: "boolean", default: false, describe: "replace a remote of the same name" } },
      run: async (a) => {
        const { addRemote, parseJoin } = await import("../client/remotes.ts");
        const join = parseJoin(await readJoin(a.join));
        const r = await addRemote(a.name, join, { force: a.force });
        const s = r.servers[0]!;
        if (a.json) return printJson({ name: a.name, url: s.url, user: r.user, fingerprint: s.fingerprint });
        process.stdout.write(
          `added ${a.name}: ${s.url} as ${r.user}, certificate sha256 ${s.fingerprint} pinned\nuse it: hutch --remote ${a.name} box list (or: hutch remote default ${a.name})\n`,
        );
      },
    }),
    command<AddArgs>({
      command: "add-server <name> [join]",
      describe:
        "add another server of the remote's fleet, from a join string made there (- or none: read it from stdin); pins its certificate and checks it takes the remote's token",
      run: async (a) => {
        const { addServer, parseJoin } = await import("../client/remotes.ts");
        const join = parseJoin(await readJoin(a.join));
        const { entry, server, extraToken } = await addServer(a.name, join);
        if (a.json)
          return printJson({ name: a.name, url: server.url, fingerprint: server.fingerprint, servers: entry.servers.map((s) => s.url) });
        const id = /^hutch_(tok_[0-9a-z]{12})_/.exec(join.token)?.[1];
        process.stdout.write(
          `${a.name}: added ${server.url}, certificate sha256 ${server.fingerprint} pinned; ${entry.servers.length} servers\n` +
            (extraToken && id
              ? `the join string's own token ${id} is not kept (the remote's token works there): revoke it: hutch token revoke ${id}\n`
              : ""),
        );
      },
    }),
    command<GlobalArgs & { name: string; url: string }>({
      command: "rm-server <name> <url>",
      describe: "stop using one server of a remote (its last server stays: hutch remote rm forgets the remote)",
      run: async (a) => {
        const { removeServer } = await import("../client/remotes.ts");
        const r = removeServer(a.name, a.url);
        if (a.json) return printJson({ name: a.name, removed: a.url, servers: r.servers.map((s) => s.url) });
        process.stdout.write(`${a.name}: removed ${a.url}; ${r.servers.length} left\n`);
      },
    }),
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "list remotes (the default marked *) and each one's servers",
      run: async (a) => {
        const { activeServer, readRemotes } = await import("../client/remotes.ts");
        const f = readRemotes();
        const rows = Object.entries(f.remotes).map(([name, r]): RemoteListRow => {
          const active = activeServer(r);
          return {
            name,
            url: r.servers[active]!.url,
            user: r.user,
            fingerprint: r.servers[active]!.fingerprint,
            default: f.default === name,
            servers: r.servers.map((s, i) => ({ url: s.url, fingerprint: s.fingerprint, active: i === active })),
          };
        });
        if (a.json) return printJson(rows);
        process.stdout.write(
          table([
            ["NAME", "URL", "USER", "FINGERPRINT"],
            [f.default ? "local" : "local *", "(this machine's daemon)", "-", "-"],
            // One line per server; the remote's name and user on its first.
            ...rows.flatMap((r) =>
              r.servers.map((s, i) =>
                i === 0
                  ? [`${r.name}${r.default ? " *" : ""}`, s.url, r.user, `${s.fingerprint.slice(0, 16)}…`]
                  : ["", s.url, "", `${s.fingerprint.slice(0, 16)}…`],
              ),
            ),
          ]),
        );
      },
    }),
    command<GlobalArgs & { name: string }>({
      command: "rm <name>",
      aliases: ["remove"],
      describe: "forget a remote (its token stays valid on the server until revoked there)",
      run: async (a) => {
        const { readRemotes, writeRemotes } = await import("../client/remotes.ts");
        const f = readRemotes();
        if (!f.remotes[a.name]) throw new HutchError("not_found", `no remote "${a.name}"`, "list them: hutch remote list");
        delete f.remotes[a.name];
        if (f.default === a.name) delete f.default;
        writeRemotes(f);
        if (a.json) return printJson({ name: a.name, removed: true });
        process.stdout.write(`removed ${a.name}\n`);
      },
    }),
    command<GlobalArgs & { name: string }>({
      command: "default <name>",
      describe: "talk to this remote when no --remote is given (local: the local daemon)",
      run: async (a) => {
        const { readRemotes, writeRemotes, LOCAL } = await import("../client/remotes.ts");
        const f = readRemotes();
        if (a.name !== LOCAL && !f.remotes[a.name])
          throw new HutchError("not_found", `no remote "${a.name}"`, "list them: hutch remote list");
        if (a.name === LOCAL) delete f.default;
        else f.default = a.name;
        writeRemotes(f);
        if (a.json) return printJson({ default: a.name });
        process.stdout.write(`verbs now talk to ${a.name}\n`);
      },
    }),
    command<GlobalArgs & { name: string; fingerprint: string }>({
      command: "pin <name> <fingerprint>",
      describe:
        "trust a server's new certificate, after its admin confirms the fingerprint (each server of the remote presenting it is pinned to it)",
      run: async (a) => {
        const { repin } = await import("../client/remotes.ts");
        const r = await repin(a.name, a.fingerprint);
        if (a.json) return printJson({ name: a.name, fingerprint: r.fingerprint, servers: r.pinned });
        process.stdout.write(`${a.name}: certificate sha256 ${r.fingerprint} pinned for ${r.pinned.join(", ")}\n`);
      },
    }),
  ],
});
