// One webview per session's log (its subscription is src/panels.ts's); the
// panel forwards the events to the webview, which renders and virtualizes
// them (src/log/view.ts), and opens the files annotations are anchored to.
import * as vscode from "vscode";
import { anchorInWorkspace, type EventsNotification } from "@hutch/shared";
import { escapeHtml, SessionPanel, webviewPage, type SessionPanels } from "../panels.ts";
import { terminalText } from "@hutch/shared/text";

type FromView = { type: "ready" } | { type: "open"; path: string; line?: number };

/** Opens (or brings forward) the log view of a session. */
export function showLog(panels: SessionPanels, session: string, title: string): void {
  panels.open(`log:${session}`, () => new LogPanel(panels, session, title));
}

class LogPanel extends SessionPanel {
  constructor(owner: SessionPanels, session: string, title: string) {
    const media = vscode.Uri.joinPath(owner.extensionUri, "out");
    const panel = vscode.window.createWebviewPanel(
      "hutch.log",
      `log: ${terminalText(title, { oneLine: true })}`,
      vscode.ViewColumn.Active,
      {
        enableScripts: true,
        retainContextWhenHidden: true,
        localResourceRoots: [media],
      },
    );
    super(owner, session, panel);
    panel.webview.html = html(panel.webview, media, session);
    panel.webview.onDidReceiveMessage((m: FromView) => this.fromView(m));
  }

  protected deliver(n: EventsNotification): void {
    void this.panel.webview.postMessage({ type: "events", events: n.events, caughtUp: n.caughtUp, output: n.output });
  }

  private async fromView(m: FromView): Promise<void> {
    if (m.type === "ready") return this.viewReady();
    const root = vscode.workspace.workspaceFolders?.[0]?.uri;
    if (!root) return void vscode.window.showWarningMessage(`hutch: open a folder to follow anchors (${terminalText(m.path)})`);
    // Anchors are whoever annotated the session's words: only files in the workspace are opened.
    const rel = anchorInWorkspace(root.path, m.path);
    if (rel === null)
      return void vscode.window.showWarningMessage(`hutch: the anchor ${terminalText(m.path)} points outside the workspace; not opened`);
    const uri = rel === "" ? root : vscode.Uri.joinPath(root, rel);
    const line = Math.max(0, (m.line ?? 1) - 1);
    await vscode.window.showTextDocument(uri, { selection: new vscode.Range(line, 0, line, 0), preview: false });
  }
}

function html(webview: vscode.Webview, media: vscode.Uri, id: string): string {
  return webviewPage(webview, media, {
    name: "log",
    title: "hutch log",
    data: { session: id },
    body: `<div id="toolbar">
  <span id="title">${escapeHtml(id)}</span>
  <label>kind <select id="kind"><option value="">all</option></select></label>
  <label>actor <select id="actor"><option value="">all</option></select></label>
  <span id="count"></span>
</div>
<div id="scroller"><div id="spacer"></div></div>`,
  });
}
