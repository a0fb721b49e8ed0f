import { PtyKillResult, PtyListResult } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { attachPty } from "../client/exec.ts";
import { callTool } from "../client/tool.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";
import { printJson, table } from "./output.ts";

type BoxArg = GlobalArgs & { box: string };
type IdArg = BoxArg & { id: string; signal?: string };

export const pty = body<GlobalArgs>({
  demand: "name a pty command",
  commands: [
    command<BoxArg>({
      command: "list <box>",
      aliases: ["ls"],
      describe: "list a box's terminals",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const ptys = await callTool(d, a.box, { tool: "pty.list" }, PtyListResult);
        if (a.json) return printJson(ptys);
        process.stdout.write(
          ptys.length === 0
            ? "no terminals\n"
            : table([
                ["ID", "PID", "SIZE", "ATTACHED", "COMMAND"],
                ...ptys.map((p) => [p.id, String(p.pid), `${p.cols}x${p.rows}`, String(p.attached), p.argv.join(" ")]),
              ]),
        );
      },
    }),
    command<IdArg>({
      command: "attach <box> <id>",
      describe: "attach to a terminal: its screen comes back (detach: Ctrl-A d)",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        setExitCode(await attachPty(d, a.box, a.id, { json: a.json }));
      },
    }),
    command<IdArg>({
      command: "kill <box> <id>",
      describe: "send a signal to a terminal's process",
      options: { signal: { type: "string", default: "TERM" } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const r = await callTool(d, a.box, { tool: "pty.kill", id: a.id, signal: a.signal }, PtyKillResult);
        if (a.json) printJson(r);
      },
    }),
  ],
});
