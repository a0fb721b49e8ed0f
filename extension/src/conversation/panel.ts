// The conversation view on the extension side: one webview per session (its
// subscription is src/panels.ts's), which replays the session's log from seq 1
// every time it opens, so after a window reload (VS Code restores the panel
// through the serializer registered here) the conversation comes back from the
// daemon, not from the webview's memory. It sends prompts as the CLI does:
// takes the driver slot (asking before taking it from someone else), types
// the prompt, keeps the slot's lease alive until the agent's turn ends, then
// lets it go. Stop interrupts the turn; an approval's buttons run `hutch
// approve` / `hutch deny`; Open Diff shows an edit in VS Code's diff editor,
// against the local file when this folder was offloaded to the session's box.
import { readFile } from "node:fs/promises";
import * as vscode from "vscode";
import { Events, IdeMethods, read, type EventsNotification, type Session } from "@hutch/shared";
import type { ToolEdit } from "@hutch/shared/agent-tools";
import { terminalText } from "@hutch/shared/text";
import { escapeHtml, SessionPanel, webviewPage, type SessionPanels } from "../panels.ts";
import { answerApproval } from "../approvals.ts";
import type { Choice } from "../approval-prompt.ts";
import type { Invocation } from "../cli.ts";
import { offloadPaths } from "../offload.ts";

export const CONVERSATION_VIEW = "hutch.conversation";
/** The driver slot's lease while a prompt's turn runs, renewed at a third of it (a closed window frees the slot). */
const LEASE_MS = 60_000;
/** Virtual documents for the agent's side of a diff. */
export const EDIT_SCHEME = "hutch-edit";

type FromView =
  | { type: "ready" }
  | { type: "send"; text: string }
  | { type: "stop" }
  | { type: "approve"; id: string; choice: Choice }
  | { type: "diff"; edit: ToolEdit; tool: string };

/** What a conversation panel needs besides its session. */
export interface ConversationDeps {
  panels: SessionPanels;
  /** `hutch` with the extension's home and remote, for approve and deny. */
  invocation(args: string[]): Invocation | undefined;
  /** The agent's side of each diff opened, by URI path. */
  edits: EditDocuments;
}

/** Which session a panel shows: what the webview keeps (its state) and the serializer restores. */
export interface ConversationTarget {
  session: string;
  title: string;
  headless: boolean;
  box?: string;
}

export function showConversation(deps: ConversationDeps, t: ConversationTarget): void {
  deps.panels.open(`conversation:${t.session}`, () => {
    const panel = vscode.window.createWebviewPanel(CONVERSATION_VIEW, titleOf(t), vscode.ViewColumn.Active, options(deps));
    return new ConversationPanel(deps, t, panel);
  });
}

/** Restores the conversation views open before a window reload: the session from the webview's state, the rest from the log. */
export function conversationSerializer(deps: ConversationDeps): vscode.WebviewPanelSerializer {
  return {
    async deserializeWebviewPanel(panel, state: unknown) {
      const s = state as Partial<ConversationTarget> | undefined;
      if (typeof s?.session !== "string") return void panel.dispose();
      const t: ConversationTarget = {
        session: s.session,
        title: s.title ?? s.session,
        headless: s.headless !== false,
        ...(s.box ? { box: s.box } : {}),
      };
      panel.webview.options = options(deps);
      panel.title = titleOf(t);
      deps.panels.adopt(`conversation:${t.session}`, new ConversationPanel(deps, t, panel));
    },
  };
}

const titleOf = (t: ConversationTarget) => `chat: ${terminalText(t.title, { oneLine: true })}`;
const media = (deps: ConversationDeps) => vscode.Uri.joinPath(deps.panels.extensionUri, "out");
const options = (deps: ConversationDeps): vscode.WebviewPanelOptions & vscode.WebviewOptions => ({
  enableScripts: true,
  retainContextWhenHidden: true,
  localResourceRoots: [media(deps)],
});

class ConversationPanel extends SessionPanel {
  /** The seq of the prompt this panel sent whose turn has not ended, while it holds the slot for it. */
  private turn: { seq: number; beat: ReturnType<typeof setInterval> } | null = null;

  constructor(
    private readonly deps: ConversationDeps,
    private readonly target: ConversationTarget,
    panel: vscode.WebviewPanel,
  ) {
    super(deps.panels, target.session, panel);
    panel.webview.html = html(panel.webview, media(deps), target);
    panel.webview.onDidReceiveMessage((m: FromView) => void this.fromView(m));
    panel.onDidDispose(() => void this.endTurn());
  }

  protected deliver(n: EventsNotification): void {
    void this.panel.webview.postMessage({ type: "events", events: n.events });
    // The prompt's turn ended (the agent is no longer busy after it): the slot goes back.
    const t = this.turn;
    if (t && n.events.some((e) => e.seq > t.seq && (read(e, Events.agentState)?.state ?? "busy") !== "busy")) void this.endTurn();
  }

  private status(text: string, tone?: "error" | "ok"): void {
    void this.panel.webview.postMessage({ type: "status", text, ...(tone ? { tone } : {}) });
  }

  private async fromView(m: FromView): Promise<void> {
    if (m.type === "ready") return this.viewReady();
    if (m.type === "send") return this.send(m.text);
    if (m.type === "stop") return this.stop();
    if (m.type === "approve") return answerApproval(this.deps.invocation, m.id, m.choice);
    if (m.type === "diff") return this.diff(m.edit, m.tool);
  }

  private rpc<T>(method: string, params: unknown): Promise<T> {
    const c = this.owner.rpc;
    if (!c) return Promise.reject(new Error("not connected to hutch; see the hutch sidebar"));
    return c.sendRequest<T>(method, params);
  }

  /** Takes the driver slot with a lease; when someone else drives, asks before taking it over. False: not taken. */
  private async drive(): Promise<boolean> {
    try {
      await this.rpc<Session>(IdeMethods.driver, { session: this.session, action: "acquire", leaseMs: LEASE_MS });
      return true;
    } catch (err) {
      const message = (err as Error).message;
      if (!/driven by/.test(message)) throw err;
      const pick = await vscode.window.showWarningMessage(`hutch: ${terminalText(message, { oneLine: true })}. Take it over?`, "Take Over");
      if (pick !== "Take Over") return false;
      await this.rpc<Session>(IdeMethods.driver, { session: this.session, action: "steal", leaseMs: LEASE_MS });
      return true;
    }
  }

  private async send(text: string): Promise<void> {
    // Whether this prompt took the slot: a prompt refused gives back only what it took (a turn still running keeps it).
    let took = false;
    try {
      if (!this.turn) {
        if (!(await this.drive())) return this.status("not sent: another client drives this session", "error");
        took = true;
      }
      // A headless agent takes the prompt whole; an agent's terminal (its TUI) gets it typed, then Enter.
      const { seq } = await this.rpc<{ seq: number }>(IdeMethods.send, {
        session: this.session,
        text: this.target.headless ? text : `${text}\r`,
      });
      if (this.turn) this.turn.seq = seq;
      else
        this.turn = {
          seq,
          beat: setInterval(
            () => void this.rpc(IdeMethods.driver, { session: this.session, action: "heartbeat" }).catch(() => undefined),
            LEASE_MS / 3,
          ),
        };
      this.status("");
    } catch (err) {
      this.status(`not sent: ${(err as Error).message}`, "error");
      if (took) await this.release();
    } finally {
      void this.panel.webview.postMessage({ type: "busy", sending: false });
    }
  }

  private async stop(): Promise<void> {
    try {
      if (!this.turn && !(await this.drive())) return;
      await this.rpc(IdeMethods.interrupt, { session: this.session });
      this.status("stopped");
      // Nothing more to wait for when no turn of this panel's was running.
      if (!this.turn) await this.release();
    } catch (err) {
      this.status(`stop failed: ${(err as Error).message}`, "error");
    }
  }

  private async endTurn(): Promise<void> {
    const t = this.turn;
    if (!t) return;
    this.turn = null;
    clearInterval(t.beat);
    await this.release();
  }

  private release(): Promise<unknown> {
    return this.rpc(IdeMethods.driver, { session: this.session, action: "release" }).catch(() => undefined);
  }

  private async diff(edit: ToolEdit, tool: string): Promise<void> {
    const name = edit.path.split("/").pop() || edit.path;
    const paths = this.target.box ? await offloadPaths(this.target.box) : null;
    const localPath = paths?.(edit.path) ?? null;
    // Offloaded from this folder: the local file, and what it holds with the agent's edit made.
    if (localPath) {
      const local = vscode.Uri.file(localPath);
      const text = await readFile(local.fsPath, "utf8").catch(() => null);
      if (text !== null) {
        const after = edit.oldText === null ? edit.newText : text.includes(edit.oldText) ? text.replace(edit.oldText, edit.newText) : null;
        if (after !== null) {
          const right = this.deps.edits.put(edit.path, after);
          return void vscode.commands.executeCommand("vscode.diff", local, right, `${name} (local) ↔ ${tool} in the box`);
        }
      }
    }
    // Otherwise the edit itself: the text replaced and its replacement.
    const left = this.deps.edits.put(`before/${edit.path}`, edit.oldText ?? "");
    const right = this.deps.edits.put(`after/${edit.path}`, edit.newText);
    await vscode.commands.executeCommand("vscode.diff", left, right, `${name}: ${tool} in the box`);
  }
}

/** The agent's side of the diffs opened, as read-only documents (scheme hutch-edit). */
export class EditDocuments implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private n = 0;

  put(path: string, text: string): vscode.Uri {
    // Each diff opened gets its own document, so an older one is not changed under its editor.
    const uri = vscode.Uri.from({ scheme: EDIT_SCHEME, path: `/${++this.n}/${path.replace(/^\/+/, "")}` });
    this.texts.set(uri.path, text);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.path) ?? "";
  }
}

function html(webview: vscode.Webview, media: vscode.Uri, t: ConversationTarget): string {
  return webviewPage(webview, media, {
    name: "conversation",
    title: "hutch conversation",
    data: { session: t.session, headless: String(t.headless), title: t.title, box: t.box ?? "" },
    body: `<div id="head"><span id="title">${escapeHtml(terminalText(t.title, { oneLine: true }))}</span><span id="state"></span><span id="usage"></span></div>
<div id="items"></div>
<div id="status"></div>
<div id="compose">
  <textarea id="prompt" placeholder="Ask the agent (Enter sends, Shift+Enter: new line)" disabled></textarea>
  <button id="send" disabled>Send</button>
  <button id="stop" disabled>Stop</button>
</div>`,
  });
}
