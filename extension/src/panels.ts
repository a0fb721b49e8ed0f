// Webviews that follow one session's log: the live log (src/log/) and the
// conversation (src/conversation/). The bridge streams a subscription's events
// (replay, then live) as hutch/events; SessionPanels routes each to its panel,
// holding those that beat the subscribe answer, and closes a panel whose
// subscription cannot go on. A panel resubscribes from the next seq it has not
// got after the bridge restarted.
import * as vscode from "vscode";
import { IdeMethods, type EventsNotification, type SubscriptionEnded } from "@hutch/shared";
import { State, type LanguageClient } from "vscode-languageclient/node";
import { terminalText } from "@hutch/shared/text";

export class SessionPanels {
  private readonly panels = new Map<string, SessionPanel>();
  /** Subscription id → panel; events that beat the subscribe answer wait in `early`. */
  private readonly bySub = new Map<string, SessionPanel>();
  private readonly early = new Map<string, EventsNotification[]>();
  private readonly earlyEnd = new Map<string, SubscriptionEnded>();

  constructor(
    readonly extensionUri: vscode.Uri,
    private readonly client: () => LanguageClient | undefined,
  ) {}

  /** The open panel under `key` brought forward, or a new one from `make`. */
  open(key: string, make: () => SessionPanel): SessionPanel {
    const open = this.panels.get(key);
    if (open) {
      open.panel.reveal();
      return open;
    }
    const p = make();
    this.panels.set(key, p);
    return p;
  }

  /** A panel VS Code restored after a reload (a serializer made it), kept under its key. */
  adopt(key: string, p: SessionPanel): void {
    this.panels.get(key)?.panel.dispose();
    this.panels.set(key, p);
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
  bind(sub: string, panel: SessionPanel): void {
    this.bySub.set(sub, panel);
    for (const n of this.early.get(sub) ?? []) panel.post(n);
    this.early.delete(sub);
    const end = this.earlyEnd.get(sub);
    this.earlyEnd.delete(sub);
    if (end) this.ended(end);
  }

  /** @internal */
  unbind(panel: SessionPanel): void {
    for (const [sub, p] of this.bySub) if (p === panel) this.bySub.delete(sub);
  }

  /** @internal */
  forget(panel: SessionPanel): void {
    this.unbind(panel);
    for (const [key, p] of this.panels) if (p === panel) this.panels.delete(key);
  }

  get rpc(): LanguageClient | undefined {
    return this.client();
  }
}

/** A webview following one session: subscribes when its view says ready, forwards each batch, unsubscribes when closed. */
export abstract class SessionPanel {
  private subscription: string | null = null;
  /** The next seq the view has not got: a resubscribe continues from here. */
  private next = 1;

  constructor(
    protected readonly owner: SessionPanels,
    readonly session: string,
    readonly panel: vscode.WebviewPanel,
  ) {
    panel.onDidDispose(() => {
      void this.unsubscribe();
      this.owner.forget(this);
    });
  }

  /** Sends a batch to the webview. */
  protected abstract deliver(n: EventsNotification): void;

  post(n: EventsNotification): void {
    const last = n.events[n.events.length - 1];
    if (last) this.next = last.seq + 1;
    this.deliver(n);
  }

  /** The subscribe in flight: one at a time, so a view's ready and a bridge restart cannot both subscribe it. */
  private subscribing: Promise<void> = Promise.resolve();

  /**
   * The webview (re)loaded its page and holds nothing: it gets the whole log
   * again. A reload of the window can keep this panel (code-server's
   * extension host outlives the page) while its page starts afresh.
   */
  viewReady(): Promise<void> {
    this.next = 1;
    return this.subscribe();
  }

  subscribe(): Promise<void> {
    this.subscribing = this.subscribing.then(() => this.resubscribe());
    return this.subscribing;
  }

  private async resubscribe(): Promise<void> {
    const rpc = this.owner.rpc;
    // Not up yet (a window reload restores views while the bridge starts): its start subscribes every view (resubscribeAll).
    if (!rpc || rpc.state !== State.Running) return;
    await this.unsubscribe();
    try {
      const r = await rpc.sendRequest<{ subscription: string }>(IdeMethods.subscribe, { session: this.session, from: this.next });
      this.subscription = r.subscription;
      this.owner.bind(r.subscription, this);
    } catch (err) {
      this.failed(err as Error);
    }
  }

  /** The subscription could not be made (the bridge went away meanwhile): said; the bridge's restart tries again. */
  protected failed(err: Error): void {
    void vscode.window.showWarningMessage(
      `hutch: could not follow session ${this.session}: ${terminalText(err.message, { oneLine: true })}`,
    );
  }

  private async unsubscribe(): Promise<void> {
    const sub = this.subscription;
    this.subscription = null;
    this.owner.unbind(this);
    if (sub) await this.owner.rpc?.sendRequest(IdeMethods.unsubscribe, { subscription: sub }).catch(() => undefined);
  }
}

/** Text from anyone (a session id typed into a picker, a remote's) as HTML text, not markup. */
export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/**
 * A session webview's page: its script (out/NAME.js, by nonce) and style
 * (out/NAME.css), nothing else loads (no remote image: what a box wrote must
 * not make this machine fetch a URL), the body's data attributes (escaped)
 * and its markup.
 */
export function webviewPage(
  webview: vscode.Webview,
  media: vscode.Uri,
  page: { name: string; title: string; data: Record<string, string>; body: string },
): string {
  const nonce = crypto.randomUUID().replaceAll("-", "");
  const script = webview.asWebviewUri(vscode.Uri.joinPath(media, `${page.name}.js`));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(media, `${page.name}.css`));
  const data = Object.entries(page.data)
    .map(([k, v]) => ` data-${k}="${escapeHtml(v)}"`)
    .join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${style}">
<title>${escapeHtml(page.title)}</title></head>
<body${data}>
${page.body}
<script nonce="${nonce}" src="${script}"></script>
</body></html>`;
}
