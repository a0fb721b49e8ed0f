import type { CommandModule } from "yargs";
import { PtyKillResult, PtyListResult } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { attachPty } from "../client/exec.ts";
import { callTool } from "../client/tool.ts";
import { printJson, table } from "./output.ts";
import { setExitCode, type GlobalArgs } from "./main.ts";

type BoxArg = GlobalArgs & { box: string };
type IdArg = BoxArg & { id: string; signal?: string };

export const ptyCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: "pty <command>",
  describe: "terminals owned by a box: list, attach, kill",
  builder: (y) =>
    y
      .command<BoxArg>(["list <box>", "ls"], "list a box's terminals", (c) => c.positional("box", { type: "string", demandOption: true }), async (a) => {
        const d = await connectDaemon(a.home);
        const ptys = await callTool(d, a.box, { tool: "pty.list" }, PtyListResult);
        if (a.json) return printJson(ptys);
        process.stdout.write(
          ptys.length === 0 ? "no terminals\n" : table([["ID", "PID", "SIZE", "ATTACHED", "COMMAND"], ...ptys.map((p) => [p.id, String(p.pid), `${p.cols}x${p.rows}`, String(p.attached), p.argv.join(" ")])]),
        );
      })
      .command<IdArg>(
        "attach <box> <id>",
        "attach to a terminal: its screen comes back (detach: Ctrl-A d)",
        (c) => c.positional("box", { type: "string", demandOption: true }).positional("id", { type: "string", demandOption: true }),
        async (a) => {
          const d = await connectDaemon(a.home);
          setExitCode(await attachPty(d, a.box, a.id, { json: a.json }));
        },
      )
      .command<IdArg>(
        "kill <box> <id>",
        "send a signal to a terminal's process",
        (c) => c.positional("box", { type: "string", demandOption: true }).positional("id", { type: "string", demandOption: true }).option("signal", { type: "string", default: "TERM" }),
        async (a) => {
          const d = await connectDaemon(a.home);
          const r = await callTool(d, a.box, { tool: "pty.kill", id: a.id, signal: a.signal }, PtyKillResult);
          if (a.json) printJson(r);
        },
      )
      .demandCommand(1, "name a pty command; see: hutch pty --help"),
  handler: () => undefined,
};
