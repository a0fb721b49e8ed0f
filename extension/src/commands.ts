// The sidebar's and the editor's commands. Each asks what it needs, calls the
// bridge, and shows the daemon's own error (with its next step) on failure.
import * as vscode from "vscode";
import {
  AGENT_NAMES,
  BOX_NAME,
  ENGINE_NAMES,
  IdeMethods,
  type AgentName,
  type Box,
  type EngineName,
  type Session,
  type SessionCreateParams,
  type SessionView,
} from "@hutch/shared";
import type { LanguageClient } from "vscode-languageclient/node";
import type { HutchBinary } from "./binary.ts";
import { showLog } from "./log/panel.ts";
import type { SessionPanels } from "./panels.ts";
import type { ConversationTarget } from "./conversation/panel.ts";
import type { HutchTree, Node } from "./tree.ts";
import { cliEnv } from "./bridge.ts";
import { terminalText } from "@hutch/shared/text";

/** A session's label or a box's name, written by whoever made it: one line, escaped. */
const shown = (s: string) => terminalText(s, { oneLine: true });
import { showFailure } from "./errors.ts";
import { age, sessionTitle } from "./session-name.ts";

const titleOf = (s: Parameters<typeof sessionTitle>[0] | undefined) => (s ? sessionTitle(s) : undefined);

/** How the pickers describe each agent and engine (keyed by the shared names, so a new one is a type error here until described). */
const AGENT_DESCRIPTIONS: Record<AgentName, string> = {
  claude: "Claude Code, in the session's terminal",
  codex: "Codex, in the session's terminal",
  opencode: "opencode, in the session's terminal",
  pi: "pi, in the session's terminal",
  shell: "a login shell in the box",
};
const ENGINE_DESCRIPTIONS: Record<EngineName, string> = {
  process: "namespace sandbox (bubblewrap), starts in a blink",
  qemu: "a VM (needs an image: hutch image build)",
};
const BOX_NAME_RE = new RegExp(`^${BOX_NAME}$`);

/** What the commands need from the running extension (extension.ts makes it at activation). */
export interface Ctx {
  tree: HutchTree;
  panels: SessionPanels;
  /** Opens a session's conversation view. */
  conversation(t: ConversationTarget): void;
  client(): LanguageClient | undefined;
  bin(): HutchBinary | undefined;
  config(): vscode.WorkspaceConfiguration;
  refresh(): Promise<void>;
}

export function registerCommands(ctx: Ctx, restart: () => void): vscode.Disposable[] {
  const rpc = async <T>(what: string, method: string, params?: unknown): Promise<T | undefined> => {
    const c = ctx.client();
    if (!c) {
      void vscode.window.showErrorMessage("hutch: not connected to hutch; see the hutch sidebar");
      return undefined;
    }
    try {
      return await c.sendRequest<T>(method, params);
    } catch (err) {
      showFailure(what, err);
      return undefined;
    }
  };

  const pickSession = async (node?: Node): Promise<SessionView | undefined> => {
    if (node?.type === "session") return node.session;
    const list = ctx.tree.openSessions();
    if (list.length === 1) return list[0];
    if (list.length === 0) {
      void vscode.window.showInformationMessage("hutch: no open session; start one with hutch: New Session");
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      list.map((s) => ({ label: shown(sessionTitle(s)), description: `${s.id} · ${shown(s.boxName)} · ${s.activity}`, s })),
      { placeHolder: "Which session?", ignoreFocusOut: true },
    );
    return pick?.s;
  };

  const pickBox = async (node?: Node): Promise<Box | undefined> => {
    if (node?.type === "box") return node.box;
    const boxes = ctx.tree.allBoxes();
    if (boxes.length === 0) return undefined;
    const pick = await vscode.window.showQuickPick(
      [
        { label: "a new box", description: "created for this session", box: undefined as Box | undefined },
        ...boxes.map((b) => ({ label: b.name, description: `${b.state} · ${b.engine}`, box: b as Box | undefined })),
      ],
      { placeHolder: "Which box?", ignoreFocusOut: true },
    );
    return pick?.box;
  };

  const terminal = (name: string, args: string[]) => {
    const bin = ctx.bin();
    if (!bin) return void vscode.window.showErrorMessage("hutch: no hutch binary; fix the hutch.path setting");
    const t = vscode.window.createTerminal({ name, shellPath: bin.path, shellArgs: args, env: cliEnv(ctx.config()) });
    t.show();
  };

  const boxAction = (action: "start" | "stop" | "delete") => async (node?: Node) => {
    if (node?.type !== "box") return;
    if (action === "delete") {
      const ok = await vscode.window.showWarningMessage(
        `Delete box "${node.box.name}"? Its workspace and home go with it.`,
        { modal: true },
        "Delete",
      );
      if (ok !== "Delete") return;
    }
    await vscode.window.withProgress({ location: { viewId: "hutch.boxes" }, title: `${action} ${node.box.name}` }, () =>
      rpc(`${action} box ${node.box.name}`, IdeMethods.box, { action, name: node.box.name }),
    );
  };

  // Every step of a several-step command (box, then agent, then label) stays open when focus moves (a webview
  // finishing its load, a click elsewhere to copy a name): a step that vanished would end the command half-way.
  return [
    vscode.commands.registerCommand("hutch.refresh", () => (ctx.client() ? ctx.refresh() : restart())),
    vscode.commands.registerCommand("hutch.doctor", () => terminal("hutch doctor", ["doctor"])),
    vscode.commands.registerCommand("hutch.box.create", async () => {
      const name = await vscode.window.showInputBox({
        prompt: "Box name",
        ignoreFocusOut: true,
        placeHolder: "lowercase letters, digits and dashes",
        validateInput: (v) => (BOX_NAME_RE.test(v) ? null : "lowercase letters, digits and dashes; starts with a letter or digit"),
      });
      if (!name) return;
      const engine = await vscode.window.showQuickPick(
        ENGINE_NAMES.map((name) => ({ label: name, description: ENGINE_DESCRIPTIONS[name], name })),
        { placeHolder: "Engine", ignoreFocusOut: true },
      );
      if (!engine) return;
      await vscode.window.withProgress({ location: { viewId: "hutch.boxes" }, title: `create ${name}` }, () =>
        rpc(`create box ${name}`, IdeMethods.box, { action: "create", name, engine: engine.name, start: true }),
      );
    }),
    vscode.commands.registerCommand("hutch.box.start", boxAction("start")),
    vscode.commands.registerCommand("hutch.box.stop", boxAction("stop")),
    vscode.commands.registerCommand("hutch.box.delete", boxAction("delete")),
    vscode.commands.registerCommand("hutch.session.create", async (node?: Node) => {
      const box = await pickBox(node);
      const agent = await vscode.window.showQuickPick(
        AGENT_NAMES.map((name) => ({ label: name, description: AGENT_DESCRIPTIONS[name], name })),
        { placeHolder: "Agent", ignoreFocusOut: true },
      );
      if (!agent) return;
      const label = await vscode.window.showInputBox({ prompt: "Label (optional)", ignoreFocusOut: true });
      if (label === undefined) return;
      const params: SessionCreateParams = { ...(box ? { box: box.name } : {}), agent: agent.name, ...(label ? { label } : {}) };
      const s = await rpc<Session>("new session", IdeMethods.sessionCreate, params);
      if (s) void ctx.refresh();
    }),
    vscode.commands.registerCommand("hutch.session.attach", async (node?: Node) => {
      const s = await pickSession(node);
      if (s) terminal(`hutch: ${shown(sessionTitle(s))}`, ["session", "attach", s.id]);
    }),
    vscode.commands.registerCommand("hutch.session.log", async (node?: Node | string) => {
      if (typeof node === "string") return showLog(ctx.panels, node, titleOf(ctx.tree.session(node)) ?? node);
      const s: SessionView | undefined = node?.type === "session" ? node.session : undefined;
      if (!s) {
        const pick = await vscode.window.showQuickPick(
          [
            ...ctx.tree.openSessions().map((x) => ({ label: shown(sessionTitle(x)), description: x.id, id: x.id })),
            { label: "Another session id…", description: "", id: "" },
          ],
          { placeHolder: "Which session's log?", ignoreFocusOut: true },
        );
        if (!pick) return;
        const id = pick.id || (await vscode.window.showInputBox({ prompt: "Session id", placeHolder: "ses_…", ignoreFocusOut: true }));
        if (!id) return;
        return showLog(ctx.panels, id, titleOf(ctx.tree.session(id)) ?? id);
      }
      showLog(ctx.panels, s.id, sessionTitle(s));
    }),
    // A row's own buttons and click: that row's session, or nothing when the click landed while the sidebar was
    // redrawing (a refresh of the root makes VS Code forget every row until it has fetched them again, and a click
    // then reaches the command with no row). Never a picker nobody asked for; the palette's commands ask.
    vscode.commands.registerCommand("hutch.session.log.row", (node?: Node) => {
      if (node?.type === "session") showLog(ctx.panels, node.session.id, sessionTitle(node.session));
    }),
    vscode.commands.registerCommand("hutch.conversation.open", async (node?: Node | string) => {
      const target = (s: SessionView): ConversationTarget => ({
        session: s.id,
        title: sessionTitle(s),
        headless: s.headless === true,
        box: s.boxName,
      });
      if (node && typeof node !== "string" && node.type === "session") return ctx.conversation(target(node.session));
      let id = typeof node === "string" ? node : undefined;
      if (!id) {
        // The history: every session of every box, agents' first, newest first.
        const sessions = ctx.tree.allSessions().sort((a, b) => Number(a.agent === "shell") - Number(b.agent === "shell"));
        const now = Date.now();
        const pick = await vscode.window.showQuickPick(
          [
            ...sessions.map((x) => ({
              label: shown(sessionTitle(x)),
              description: `${shown(x.agent)} · ${shown(x.boxName)} · ${x.state === "open" ? x.activity : "closed"} · ${age(x.createdAt, now)}`,
              id: x.id,
            })),
            { label: "Another session id…", description: "", id: "" },
          ],
          { placeHolder: "Which session's conversation?", ignoreFocusOut: true, matchOnDescription: true },
        );
        if (!pick) return;
        id = pick.id || (await vscode.window.showInputBox({ prompt: "Session id", placeHolder: "ses_…", ignoreFocusOut: true }));
        if (!id) return;
      }
      const s = ctx.tree.session(id);
      ctx.conversation(s ? target(s) : { session: id, title: id, headless: true });
    }),
    // An agent prompted from the conversation view, not a terminal: a headless session (kept warm between prompts).
    vscode.commands.registerCommand("hutch.conversation.new", async (node?: Node) => {
      const box = await pickBox(node);
      const agent = await vscode.window.showQuickPick(
        AGENT_NAMES.filter((n) => n !== "shell").map((name) => ({ label: name, description: AGENT_DESCRIPTIONS[name], name })),
        { placeHolder: "Agent", ignoreFocusOut: true },
      );
      if (!agent) return;
      const params: SessionCreateParams = { ...(box ? { box: box.name } : {}), agent: agent.name, headless: true };
      const s = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `hutch: starting ${agent.name}${box ? ` in ${box.name}` : ""}` },
        () => rpc<Session>("new conversation", IdeMethods.sessionCreate, params),
      );
      if (!s) return;
      void ctx.refresh();
      ctx.conversation({ session: s.id, title: `${s.agent}, no prompt yet`, headless: true, box: s.boxName });
    }),
    vscode.commands.registerCommand("hutch.conversation.open.row", (node?: Node) => {
      if (node?.type === "session")
        ctx.conversation({
          session: node.session.id,
          title: sessionTitle(node.session),
          headless: node.session.headless === true,
          box: node.session.boxName,
        });
    }),
    vscode.commands.registerCommand("hutch.session.attach.row", (node?: Node) => {
      if (node?.type === "session") terminal(`hutch: ${shown(sessionTitle(node.session))}`, ["session", "attach", node.session.id]);
    }),
    vscode.commands.registerCommand("hutch.copyId", async (node?: Node) => {
      if (!node || node.type === "server") return;
      const id = node.type === "box" ? node.box.id : node.session.id;
      await vscode.env.clipboard.writeText(id);
      vscode.window.setStatusBarMessage(`copied ${id}`, 3000);
    }),
    vscode.commands.registerCommand("hutch.annotate", async () => {
      const editor = vscode.window.activeTextEditor;
      if (!editor) return void vscode.window.showInformationMessage("hutch: open a file and select the lines to annotate");
      const session = await pickSession();
      if (!session) return;
      const line = editor.selection.start.line + 1;
      const path = vscode.workspace.asRelativePath(editor.document.uri, false);
      const text = await vscode.window.showInputBox({ prompt: `Annotate ${path}:${line} in ${session.label ?? session.id}` });
      if (!text) return;
      const r = await rpc<{ seq: number }>("annotate", IdeMethods.annotate, { session: session.id, text, anchor: { path, line } });
      if (r) vscode.window.setStatusBarMessage(`hutch: annotated ${path}:${line} (#${r.seq})`, 4000);
    }),
  ];
}
