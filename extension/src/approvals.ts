// Approvals in VS Code: a notification for each approval a box asks
// (host/src/approval), with Allow / Always / Deny, answered through the CLI
// (`hutch approve` / `hutch deny`), so the bridge's home and remote apply as
// for every verb the extension runs. The list comes from `hutch approvals
// --watch --json`, each line checked against the shared schema.
import { spawn, type ChildProcess } from "node:child_process";
import * as vscode from "vscode";
import { Approval } from "@hutch/shared";
import { lineSplitter, runJson, type Invocation } from "./cli.ts";
import { CHOICES, decisionArgs, notificationText, watchLine, type Choice } from "./approval-prompt.ts";

/** How long to wait before starting the watch again after it ended (no binary yet, a daemon restart). */
const RESTART_MS = 3000;

/** Answers an approval as a person would (`hutch approve` / `hutch deny`), saying how it ended. */
export async function answerApproval(invocation: (args: string[]) => Invocation | undefined, id: string, choice: Choice): Promise<void> {
  const inv = invocation(decisionArgs(id, choice));
  if (!inv) return;
  try {
    const done = await runJson(inv, Approval);
    void vscode.window.showInformationMessage(`hutch: ${id} ${done.state.replace("_", " ")}`);
  } catch (err) {
    void vscode.window.showErrorMessage(`hutch: ${(err as Error).message}`);
  }
}

export function registerApprovals(deps: { invocation: (args: string[]) => Invocation | undefined }): vscode.Disposable[] {
  let child: ChildProcess | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const shown = new Set<string>();

  const answer = (a: Approval, choice: Choice) => answerApproval(deps.invocation, a.id, choice);

  const notify = (a: Approval) => {
    if (shown.has(a.id)) return;
    shown.add(a.id);
    void vscode.window.showWarningMessage(notificationText(a), ...CHOICES).then((choice) => {
      if (choice) void answer(a, choice);
    });
  };

  const start = () => {
    timer = undefined;
    if (stopped) return;
    const inv = deps.invocation(["approvals", "--watch"]);
    if (!inv) {
      timer = setTimeout(start, RESTART_MS);
      return;
    }
    const c = spawn(inv.bin, [...inv.args, "--json"], { cwd: inv.cwd, env: inv.env, stdio: ["ignore", "pipe", "ignore"] });
    child = c;
    c.stdout?.setEncoding("utf8").on(
      "data",
      lineSplitter((line) => {
        const l = watchLine(line);
        if (l?.type === "pending") notify(l.approval);
      }),
    );
    c.on("error", () => undefined);
    c.on("close", () => {
      if (child === c) child = undefined;
      if (!stopped) timer = setTimeout(start, RESTART_MS);
    });
  };
  start();
  return [
    {
      dispose: () => {
        stopped = true;
        clearTimeout(timer);
        child?.kill();
      },
    },
  ];
}
