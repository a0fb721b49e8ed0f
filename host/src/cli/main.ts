// The CLI: yargs wiring and the one place errors become output and exit codes.
// Verb files only parse flags and call into client/ or daemon/.
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { HUTCH_VERSION, HutchError } from "@hutch/shared";
import { configureLog } from "../log.ts";
import { env } from "../env.ts";
import { boxCommand } from "./box.ts";
import { execCommand } from "./exec.ts";
import { cpCommand } from "./cp.ts";
import { ptyCommand } from "./pty.ts";
import { doctorCommand } from "./doctor.ts";
import { daemonCommand } from "./daemon.ts";
import { sessionCommand } from "./session.ts";
import { runCommand } from "./run.ts";
import { agentsCommand } from "./agent.ts";
import { imageCommand } from "./image.ts";
import { secretCommand } from "./secret.ts";
import { ideCommand } from "./ide.ts";

let handlerExit = 0;
/** Verbs set the process exit code here (yargs handlers return nothing). */
export function setExitCode(code: number): void {
  handlerExit = code;
}

export interface GlobalArgs {
  json: boolean;
  home: string;
}

/** Prints a named error (human: two lines on stderr; --json: one document on stdout) and returns its exit code. */
export function report(err: unknown, json: boolean): number {
  const e = err instanceof HutchError ? err : new HutchError("failed", err instanceof Error ? err.message : String(err));
  if (json) process.stdout.write(JSON.stringify(e.toBody()) + "\n");
  else process.stderr.write(`hutch: ${e.message}\n${e.hint ? `  next: ${e.hint}\n` : ""}`);
  return e.exitCode;
}

export async function runCli(argv: string[]): Promise<number> {
  const args = hideBin(["bun", "hutch", ...argv]);
  const json = args.includes("--json");
  let exitCode = 0;
  const parser = yargs(args)
    .scriptName("hutch")
    .usage("hutch: run coding agents in isolated boxes\n\nUsage: $0 <command> [options]")
    .option("json", { type: "boolean", default: false, describe: "print one JSON document (NDJSON for streams) on stdout" })
    .option("home", { type: "string", default: env.home(), describe: "state directory ($HUTCH_HOME)", defaultDescription: "$HUTCH_HOME or ~/.local/share/hutch" })
    .option("log-level", { type: "string", choices: ["debug", "info", "warn", "error"], describe: "log verbosity (stderr)" })
    .option("log-format", { type: "string", choices: ["text", "json"], describe: "log line format" })
    .middleware((a) => configureLog({ level: (a["log-level"] as string | undefined) ?? env.logLevel(), format: (a["log-format"] as string | undefined) ?? env.logFormat() }))
    .command(runCommand)
    .command(sessionCommand)
    .command(agentsCommand)
    .command(boxCommand)
    .command(execCommand)
    .command(cpCommand)
    .command(ptyCommand)
    .command(doctorCommand)
    .command(daemonCommand)
    .command(imageCommand)
    .command(secretCommand)
    .command(ideCommand)
    .completion("completion", "print a shell completion script (bash/zsh): hutch completion >> ~/.bashrc")
    .demandCommand(1, "name a command; see: hutch --help")
    .strict()
    .version(HUTCH_VERSION)
    .alias("h", "help")
    .wrap(Math.min(100, process.stdout.columns || 100))
    .exitProcess(false)
    .fail((msg, err) => {
      if (err) throw err;
      throw new HutchError("invalid", msg, "see: hutch --help");
    });
  try {
    await parser.parseAsync();
    exitCode = handlerExit;
  } catch (err) {
    exitCode = report(err, json);
  }
  return exitCode;
}
