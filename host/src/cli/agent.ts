import { AgentInstallResult, type AgentInfo } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { runOp } from "../client/ops.ts";
import { progressDisplay } from "../client/progress.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

export const agent = body<GlobalArgs>({
  demand: "name an agent command",
  commands: [
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "list agents, their pinned versions and whether they are installed",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const rows = await d.request<AgentInfo[]>("GET", "/v1/agents");
        if (a.json) return printJson(rows);
        process.stdout.write(
          table([
            ["AGENT", "PACKAGE", "PINNED", "INSTALLED", "BINDINGS"],
            ...rows.map((r) => [r.agent, r.package ?? "-", r.pinned ?? "-", r.installed ?? "no", r.bindings.join(",") || "-"]),
          ]),
        );
      },
    }),
    command<GlobalArgs & { names: string[] }>({
      command: "install [names..]",
      describe: "install the pinned agent CLIs (all when none is named)",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const display = a.json ? null : progressDisplay();
        let done: (typeof AgentInstallResult)["static"];
        try {
          done = await runOp(d, "/v1/agents/install", { names: a.names }, AgentInstallResult, {
            line: (l) => a.json && process.stdout.write(`${JSON.stringify(l)}\n`),
            progress: (p) => (a.json ? p.type === "note" && process.stderr.write(`hutch: ${p.text}\n`) : display!.show(p)),
          });
        } finally {
          display?.stop();
        }
        if (!a.json)
          for (const r of done) process.stdout.write(`${r.agent} ${r.version} ${r.fresh ? "installed" : "already installed"}: ${r.path}\n`);
      },
    }),
  ],
});
