// One way a failed command is shown: what failed, the message, and the next
// step, whether it came from the bridge (a JSON-RPC error, the hint in its
// data) or from a CLI verb the extension ran (a CliError).
import * as vscode from "vscode";
import { terminalText } from "@hutch/shared/text";

type Failure = { message?: string; hint?: string; data?: { hint?: string } };

export function showFailure(what: string, err: unknown): void {
  const e = (err ?? {}) as Failure;
  const hint = e.hint ?? e.data?.hint;
  // A message can quote a box or another user: escaped, so no control or bidi character reaches the notification.
  const text = terminalText(`${e.message ?? String(err)}${hint ? ` (next: ${hint})` : ""}`, { oneLine: true });
  void vscode.window.showErrorMessage(`hutch: ${what} failed: ${text}`);
}
