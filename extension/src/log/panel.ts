// One webview per session's log. The bridge streams the session's events
// (replay, then live) as hutch/events; the panel forwards them to the webview,
// which renders and virtualizes them (src/log/view.ts).
import * as vscode from "vscode";
import { anchorInWorkspace, IdeMethods, type EventsNotification, type SubscriptionEnded } from "@hutch/shared";
import type { LanguageClient } from "vscode-languageclient/node";
import { terminalText } from "@hutch/shared/text";

type FromView = { type: "ready" } | { type: "open"; path: string; line?: number };

export class LogPanels {
  private readonly panels = new Map<string, LogPanel>();
  /** Subscription id → panel; events that beat the subscribe answer wait in `early`. */
  private readonly bySub = new Map<string, LogPanel>();
  private readonly early = new Map<string, EventsNotification[]>();
  private readonly earlyEnd = new Map<string, SubscriptionEnded>();

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly client: () => LanguageClient | undefined,
  ) {}

  show(session: string, title: string): void {
    const open = this.panels.get(session);
    if (open) return open.panel.reveal();
    const panel = new LogPanel(this, session, title);
    this.panels.set(session, panel);
  }

  events(n: EventsNotification): void {
    const p = this.bySub.get(n.subscription);
    if (p) return p.post(n);
    const list = this.early.get(n.subscription) ?? [];
    list.push(n);
    this.early.set(n.subscription, list);
  }

  ended(n: SubscriptionEnded): void {
    const p = this.bySub.get(n.subscription);
    if (!p) return void this.earlyEnd.set(n.subscription, n);
    void vscode.window.showErrorMessage(
      `hutch: the log of ${n.session} closed: ${terminalText(`${n.message}${n.hint ? ` (next: ${n.hint})` : ""}`, { oneLine: true })}`,
    );
    p.panel.dispose();
  }

  /** After the bridge restarted or the daemon came back, views resubscribe from where they are. */
  resubscribeAll(): void {
    for (const p of this.panels.values()) void p.subscribe();
  }

  /** @internal */
  bind(sub: string, panel: LogPanel): void {
    this.bySub.set(sub, panel);
    for (const n of this.early.get(sub) ?? []) panel.post(n);
    this.early.delete(sub);
    const end = this.earlyEnd.get(sub);
    this.earlyEnd.delete(sub);
    if (end) this.ended(end);
  }

  /** @internal */
  unbind(panel: LogPanel): void {
    for (const [sub, p] of this.bySub) if (p === panel) this.bySub.delete(sub);
  }

  /** @internal */
  forget(panel: LogPanel): void {
    this.unbind(panel);
    this.panels.delete(panel.session);
  }

  get uri(): vscode.Uri {
    return this.extensionUri;
  }

  get rpc(): LanguageClient | undefined {
    return this.client();
  }
}

class LogPanel {
  readonly panel: vscode.WebviewPanel;
  private subscription: string | null = null;
  /** The next seq the view has not got: a resubscribe continues from here. */
  private next = 1;

  constructor(
    private readonly owner: LogPanels,
    readonly session: string,
    title: string,
  ) {
    const media = vscode.Uri.joinPath(owner.uri, "out");
    this.panel = vscode.window.createWebviewPanel("hutch.log", `log: ${terminalText(title, { oneLine: true })}`, vscode.ViewColumn.Active, {
      enableScripts: true,
      retainContextWhenHidden: true,
      localResourceRoots: [media],
    });
    this.panel.webview.html = html(this.panel.webview, media, session);
    this.panel.webview.onDidReceiveMessage((m: FromView) => this.fromView(m));
    this.panel.onDidDispose(() => {
      void this.unsubscribe();
      this.owner.forget(this);
    });
  }

  post(n: EventsNotification): void {
    const last = n.events[n.events.length - 1];
    if (last) this.next = last.seq + 1;
    void this.panel.webview.postMessage({ type: "events", events: n.events, caughtUp: n.caughtUp, output: n.output });
  }

  async subscribe(): Promise<void> {
    const rpc = this.owner.rpc;
    if (!rpc) return;
    await this.unsubscribe();
    const r = await rpc.sendRequest<{ subscription: string }>(IdeMethods.subscribe, { session: this.session, from: this.next });
    this.subscription = r.subscription;
    this.owner.bind(r.subscription, this);
  }

  private async unsubscribe(): Promise<void> {
    const sub = this.subscription;
    this.subscription = null;
    this.owner.unbind(this);
    if (sub) await this.owner.rpc?.sendRequest(IdeMethods.unsubscribe, { subscription: sub }).catch(() => undefined);
  }

  private async fromView(m: FromView): Promise<void> {
    if (m.type === "ready") return this.subscribe();
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

/** The session id as HTML text: an id typed into the picker, or a remote's, is not markup. */
const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

function html(webview: vscode.Webview, media: vscode.Uri, id: string): string {
  const session = escapeHtml(id);
  const nonce = crypto.randomUUID().replaceAll("-", "");
  const script = webview.asWebviewUri(vscode.Uri.joinPath(media, "log.js"));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(media, "log.css"));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${style}">
<title>hutch log</title></head>
<body data-session="${session}">
<div id="toolbar">
  <span id="title">${session}</span>
  <label>kind <select id="kind"><option value="">all</option></select></label>
  <label>actor <select id="actor"><option value="">all</option></select></label>
  <span id="count"></span>
</div>
<div id="scroller"><div id="spacer"></div></div>
<script nonce="${nonce}" src="${script}"></script>
</body></html>`;
}
