import type { CommandModule } from "yargs";
import { HARNESSES, harness } from "../harness/index.ts";
import { agentCommand, installAgent, installDirName, installedVersion } from "../harness/install.ts";
import { env } from "../env.ts";
import { join } from "node:path";
import { printJson, table } from "./output.ts";
import type { GlobalArgs } from "./main.ts";

export const agentsCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: "agent <command>",
  describe: "agent CLIs: list what is installed, install the pinned versions (npm, on the host, shared read-only with boxes)",
  builder: (y) =>
    y
      .command<GlobalArgs>(["list", "ls"], "list agents, their pinned versions and whether they are installed", (c) => c, (a) => {
        const dir = env.agentsDir(a.home);
        const rows = Object.values(HARNESSES).map((h) => ({
          agent: h.name,
          package: h.npm?.name ?? null,
          pinned: h.npm?.version ?? null,
          installed: h.npm ? installedVersion(join(dir, installDirName(h)), h.npm) : "built in",
          path: agentCommand(h, dir),
          bindings: h.bindings,
        }));
        if (a.json) return printJson(rows);
        process.stdout.write(table([["AGENT", "PACKAGE", "PINNED", "INSTALLED", "BINDINGS"], ...rows.map((r) => [r.agent, r.package ?? "-", r.pinned ?? "-", r.installed ?? "no", r.bindings.join(",") || "-"])]));
      })
      .command<GlobalArgs & { names: string[] }>(
        "install [names..]",
        "install the pinned agent CLIs (all when none is named)",
        (c) => c.positional("names", { type: "string", array: true, default: [] }),
        async (a) => {
          const dir = env.agentsDir(a.home);
          const list = a.names.length ? a.names.map(harness) : Object.values(HARNESSES);
          const done = [];
          for (const h of list.filter((x) => x.npm)) {
            if (!a.json) process.stderr.write(`${h.name}: ${h.npm!.name}@${h.npm!.version}…\n`);
            done.push(await installAgent(h, dir));
          }
          if (a.json) return printJson(done);
          for (const r of done) process.stdout.write(`${r.agent} ${r.version} ${r.fresh ? "installed" : "already installed"}: ${r.path}\n`);
        },
      )
      .demandCommand(1, "name an agent command; see: hutch agent --help"),
  handler: () => undefined,
};
