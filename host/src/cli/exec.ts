import { HutchError } from "@hutch/shared/base";
import { connectDaemon } from "../client/daemon.ts";
import { execInBox } from "../client/exec.ts";
import { body, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";

type ExecArgs = GlobalArgs & { box: string; cmd: string[]; tty: boolean; env?: string[]; workdir?: string; user?: "hutch" | "root" };

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

export const exec = body<ExecArgs>({
  options: {
    tty: { alias: "t", type: "boolean", default: false, describe: "on a terminal owned by the box (detach: Ctrl-A d)" },
    env: { alias: "e", type: "string", array: true, describe: "KEY=VALUE, repeatable" },
    workdir: { alias: "w", type: "string", describe: "working directory in the box (default /workspace)" },
    user: {
      alias: "u",
      type: "string",
      choices: ["hutch", "root"],
      describe: "who runs it: the box's user hutch (uid 1000, default) or root (VM boxes only)",
    },
  },
  examples: [
    ["$0 exec web -- sh -c 'make test'", "run a command"],
    ["$0 exec -t web -- bash", "an interactive shell"],
  ],
  run: async (a) => {
    if (a.cmd.length === 0) throw new HutchError("invalid", "no command given", `e.g. hutch exec ${a.box} -- sh -c 'echo hi'`);
    const d = await connectDaemon(a.home);
    setExitCode(
      await execInBox(
        d,
        a.box,
        { argv: a.cmd, env: parseEnv(a.env), cwd: a.workdir, tty: a.tty, ...(a.user ? { user: a.user } : {}) },
        { json: a.json },
      ),
    );
  },
});
