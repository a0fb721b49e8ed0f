// How a verb ends: the exit code it sets, and the one way an error becomes
// output (human: two lines on stderr; --json: one document on stdout).
import { HutchError, terminalJson, terminalText } from "@hutch/shared/base";

let code = 0;

/** Verbs set the process exit code here (handlers return nothing). */
export function setExitCode(c: number): void {
  code = c;
}

export const exitCode = (): number => code;

/** Prints a named error and returns its exit code. */
export function report(err: unknown, json: boolean): number {
  const e = err instanceof HutchError ? err : new HutchError("failed", err instanceof Error ? err.message : String(err));
  // A message can carry what a box or another user wrote (a name, a reason): escaped like any log text.
  if (json) process.stdout.write(`${terminalJson(e.toBody())}\n`);
  else process.stderr.write(`hutch: ${terminalText(e.message)}\n${e.hint ? `  next: ${terminalText(e.hint)}\n` : ""}`);
  return e.exitCode;
}
