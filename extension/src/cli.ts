// Running a `hutch` verb with --json for the verbs that work on this
// machine's files or hold a connection (offload, bring-back, port list and
// forward): the same code path as the CLI, with its result checked against
// the shared schema. Progress arrives as NDJSON `step` lines on stderr; an
// error is the one JSON document on stdout, with its next step.
import { spawn, type ChildProcess } from "node:child_process";
import { check, firstError, OpProgress, type Static, type TSchema } from "@hutch/shared";

/** A verb that failed: the CLI's message and its next step. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

export interface Invocation {
  bin: string;
  args: string[];
  cwd?: string;
  env: Record<string, string | undefined>;
}

/** Output kept from a verb, so a runaway one cannot fill the extension host. */
const MAX_OUTPUT = 16 * 1024 * 1024;

/** Splits a byte stream into lines; the last, unfinished one waits for more. */
export function lineSplitter(each: (line: string) => void): (chunk: string) => void {
  let buf = "";
  return (chunk) => {
    buf += chunk;
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) each(line);
    }
  };
}

/** A progress line of stderr, or null for anything else (a log line, a warning). */
export function progressOf(line: string): Static<typeof OpProgress> | null {
  if (!line.startsWith("{")) return null;
  try {
    const v: unknown = JSON.parse(line);
    return check(OpProgress, v) ? v : null;
  } catch {
    return null;
  }
}

/** The error a verb printed (its --json error document), else one made of its exit code and stderr. */
export function failure(stdout: string, stderr: string, exit: number | null, what: string): CliError {
  try {
    const e = (JSON.parse(stdout) as { error?: { code?: unknown; message?: unknown; hint?: unknown } }).error;
    if (e && typeof e.message === "string")
      return new CliError(e.message, typeof e.code === "string" ? e.code : "failed", typeof e.hint === "string" ? e.hint : undefined);
  } catch {
    // not a document: fall through to stderr
  }
  const said = stderr
    .split("\n")
    .filter((l) => l.trim() && !progressOf(l))
    .slice(-5)
    .join(" ");
  return new CliError(`${what} exited ${exit ?? "on a signal"}${said ? `: ${said}` : ""}`, "failed");
}

/** Parses and checks a verb's one JSON document. */
export function parseResult<S extends TSchema>(schema: S, stdout: string, what: string): Static<S> {
  let v: unknown;
  try {
    v = JSON.parse(stdout);
  } catch {
    throw new CliError(`${what} printed something that is not JSON: ${stdout.slice(0, 200)}`, "failed");
  }
  if (!check(schema, v)) throw new CliError(`${what} answered an unexpected shape (${firstError(schema, v)})`, "failed");
  return v;
}

/** Runs a verb to its end; `onStep` sees each progress step; `cancel` kills it. */
export function runJson<S extends TSchema>(
  inv: Invocation,
  schema: S,
  opts: { onStep?: (title: string) => void; onChild?: (c: ChildProcess) => void } = {},
): Promise<Static<S>> {
  const what = `hutch ${inv.args.join(" ")}`;
  return new Promise((resolve, reject) => {
    const child = spawn(inv.bin, [...inv.args, "--json"], { cwd: inv.cwd, env: inv.env, stdio: ["ignore", "pipe", "pipe"] });
    opts.onChild?.(child);
    let stdout = "";
    let stderr = "";
    const steps = lineSplitter((l) => {
      const p = progressOf(l);
      if (p?.type === "step") opts.onStep?.(p.title);
      else if (p?.type === "detail" || p?.type === "note") opts.onStep?.(p.text);
    });
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      if (stdout.length < MAX_OUTPUT) stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      if (stderr.length < MAX_OUTPUT) stderr += d;
      steps(d);
    });
    child.on("error", (err) => reject(new CliError(`cannot run ${inv.bin}: ${err.message}`, "failed", "check the hutch.path setting")));
    child.on("close", (exit) => {
      if (exit !== 0) return reject(failure(stdout, stderr, exit, what));
      try {
        resolve(parseResult(schema, stdout, what));
      } catch (err) {
        reject(err);
      }
    });
  });
}
