// What an approval notification says and does, without the VS Code API (so it is tested as data).
import { ApprovalWatchLine, check, type Approval } from "@hutch/shared";
import { terminalText } from "@hutch/shared/text";

/** The buttons, in the order shown. */
export const CHOICES = ["Allow", "Always", "Deny"] as const;
export type Choice = (typeof CHOICES)[number];

/** The verb a button runs. */
export function decisionArgs(id: string, choice: Choice): string[] {
  if (choice === "Allow") return ["approve", id];
  if (choice === "Always") return ["approve", id, "--always"];
  return ["deny", id, "--reason", "denied in VS Code"];
}

/** A watch line, checked; null for anything else (a log line on stdout would be a bug, but must not break the watch). */
export function watchLine(line: string): ApprovalWatchLine | null {
  try {
    const v: unknown = JSON.parse(line);
    return check(ApprovalWatchLine, v) ? v : null;
  } catch {
    return null;
  }
}

/** What the notification says: the box and the summary, as one line of plain text (it came from the daemon, not from here). */
export function notificationText(a: Approval): string {
  const asks = a.kind === "egress" ? "asks to connect" : a.kind === "tool" ? "asks" : "asks to send";
  return terminalText(`hutch: box ${a.boxName} ${asks}: ${a.summary}`, { oneLine: true });
}
