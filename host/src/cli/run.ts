import type { CommandModule } from "yargs";
import type { Session } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { attachSession } from "../client/exec.ts";
import { printJson } from "./output.ts";
import { setExitCode, type GlobalArgs } from "./main.ts";

type RunArgs = GlobalArgs & { box?: string; agent: string; detach: boolean; label?: string };

export const runCommand: CommandModule<GlobalArgs, RunArgs> = {
  command: "run [box]",
  describe: "start a session (a shell for now) in a box, creating one when none is named, and attach to it",
  builder: (y) =>
    y
      .positional("box", { type: "string", describe: "box name or id (default: a new box)" })
      .option("agent", { type: "string", choices: ["shell"], default: "shell" })
      .option("detach", { alias: "d", type: "boolean", default: false, describe: "do not attach; print the session id" })
      .option("label", { type: "string" }),
  handler: async (a) => {
    const d = await connectDaemon(a.home);
    const s = await d.request<Session>("POST", "/v1/sessions", {
      ...(a.box ? { box: a.box } : {}),
      agent: a.agent,
      ...(a.label ? { label: a.label } : {}),
      cols: process.stdout.columns || 80,
      rows: process.stdout.rows || 24,
    });
    if (a.detach) {
      if (a.json) printJson(s);
      else process.stdout.write(`${s.id}\n`);
      return;
    }
    process.stderr.write(`session ${s.id} in box ${s.boxName} (Ctrl-A d detaches)\n`);
    setExitCode(await attachSession(d, s.id, { steal: false, json: a.json }));
  },
};
