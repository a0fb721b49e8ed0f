// One way a failed command is shown: what failed, the message, and the next
// step, whether it came from the bridge (a JSON-RPC error, the hint in its
// data) or from a CLI verb the extension ran (a CliError).
import * as vscode from "vscode";

type Failure = { message?: string; hint?: string; data?: { hint?: string } };

export function showFailure(what: string, err: unknown): void {
  const e = (err ?? {}) as Failure;
  const hint = e.hint ?? e.data?.hint;
  void vscode.window.showErrorMessage(`hutch: ${what} failed: ${e.message ?? String(err)}${hint ? ` (next: ${hint})` : ""}`);
}
