import type { CommandModule } from "yargs";
import { HutchError } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { execInBox } from "../client/exec.ts";
import { setExitCode, type GlobalArgs } from "./main.ts";

type ExecArgs = GlobalArgs & { box: string; cmd?: string[]; tty: boolean; env?: string[]; workdir?: string; user?: "hutch" | "root"; "--"?: string[] };

export function parseEnv(pairs: string[] = []): Record<string, string> | undefined {
  if (pairs.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const p of pairs) {
    const i = p.indexOf("=");
    if (i <= 0) throw new HutchError("invalid", `-e ${p}: expected KEY=VALUE`, "e.g. hutch exec BOX -e FOO=bar -- CMD");
    out[p.slice(0, i)] = p.slice(i + 1);
  }
  return out;
}

export const execCommand: CommandModule<GlobalArgs, ExecArgs> = {
  command: "exec <box> [cmd..]",
  describe: "run a command in a box; stdin, stdout, stderr and the exit code pass through (put the command after --)",
  builder: (y) =>
    y
      .parserConfiguration({ "populate--": true })
      .positional("box", { type: "string", demandOption: true })
      .positional("cmd", { type: "string", array: true })
      .option("tty", { alias: "t", type: "boolean", default: false, describe: "on a terminal owned by the box (detach: Ctrl-A d)" })
      .option("env", { alias: "e", type: "string", array: true, describe: "KEY=VALUE, repeatable" })
      .option("workdir", { alias: "w", type: "string", describe: "working directory in the box (default /workspace)" })
      .option("user", { alias: "u", type: "string", choices: ["hutch", "root"] as const, describe: "who runs it: the box's user hutch (uid 1000, default) or root (VM boxes only)" })
      .example("$0 exec web -- sh -c 'make test'", "run a command")
      .example("$0 exec -t web -- bash", "an interactive shell"),
  handler: async (a) => {
    const argv = [...(a.cmd ?? []), ...(a["--"] ?? [])].map(String);
    if (argv.length === 0) throw new HutchError("invalid", "no command given", `e.g. hutch exec ${a.box} -- sh -c 'echo hi'`);
    const d = await connectDaemon(a.home);
    const code = await execInBox(d, a.box, { argv, env: parseEnv(a.env), cwd: a.workdir, tty: a.tty, ...(a.user ? { user: a.user } : {}) }, { json: a.json });
    setExitCode(code);
  },
};
