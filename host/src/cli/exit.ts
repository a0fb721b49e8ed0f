// How a verb ends: the exit code it sets, and the one way an error becomes
// output (human: two lines on stderr; --json: one document on stdout).
import { HutchError } from "@hutch/shared/base";

let code = 0;

/** Verbs set the process exit code here (handlers return nothing). */
export function setExitCode(c: number): void {
  code = c;
}

export const exitCode = (): number => code;

/** Prints a named error and returns its exit code. */
export function report(err: unknown, json: boolean): number {
  const e = err instanceof HutchError ? err : new HutchError("failed", err instanceof Error ? err.message : String(err));
  if (json) process.stdout.write(`${JSON.stringify(e.toBody())}\n`);
  else process.stderr.write(`hutch: ${e.message}\n${e.hint ? `  next: ${e.hint}\n` : ""}`);
  return e.exitCode;
}
