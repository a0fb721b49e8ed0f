// The hutch extension: a sidebar of boxes and sessions, attach, the live log
// and annotations, all through `hutch ide --stdio` (the bridge).
import * as vscode from "vscode";
import { State, type LanguageClient } from "vscode-languageclient/node";
import {
  IDE_PROTOCOL_VERSION,
  IdeMethods,
  IdeNotifications,
  type Change,
  type DaemonStatus,
  type EventsNotification,
  type ListResult,
  type SubscriptionEnded,
} from "@hutch/shared";
import { BinaryError, resolveHutch, type HutchBinary } from "./binary.ts";
import { bridgeClient, cliEnv } from "./bridge.ts";
import { HutchTree, type Node } from "./tree.ts";
import { SessionPanels } from "./panels.ts";
import {
  CONVERSATION_VIEW,
  conversationSerializer,
  EDIT_SCHEME,
  EditDocuments,
  showConversation,
  type ConversationDeps,
} from "./conversation/panel.ts";
import { type Ctx, registerCommands } from "./commands.ts";
import { registerOffload, WorkspacesTree } from "./offload.ts";
import { registerPorts } from "./ports.ts";
import { registerApprovals } from "./approvals.ts";
import type { Invocation } from "./cli.ts";

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const tree = new HutchTree();
  let bin: HutchBinary | undefined;
  const config = () => vscode.workspace.getConfiguration("hutch");
  const panels = new SessionPanels(context.extensionUri, () => client);
  // Names the daemon the sidebar shows: the remote's name (server mode) or "local", and whether it answers.
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
  status.show();
  const setConnected = (on: boolean) => {
    const remote = config().get<string>("remote") || "local";
    status.text = `$(${on ? "vm-running" : "vm-outline"}) hutch: ${remote}`;
    status.tooltip = `hutch daemon: ${remote === "local" ? "this machine's" : `remote "${remote}" (hutch remote list)`}${on ? "" : " (not connected)"}`;
    status.command = { title: "hutch settings", command: "workbench.action.openSettings", arguments: ["hutch.remote"] };
    void vscode.commands.executeCommand("setContext", "hutch.connected", on);
  };
  setConnected(false);

  const refresh = async () => {
    if (!client || client.state !== State.Running) return;
    const list = await client.sendRequest<ListResult>(IdeMethods.list);
    tree.reset(list);
    setConnected(list.connected);
  };

  const start = async () => {
    await client?.dispose().catch(() => undefined);
    client = undefined;
    tree.disconnect();
    setConnected(false);
    try {
      bin = await resolveHutch(config().get<string>("path") ?? "", context.extensionPath, minVersion(context));
    } catch (err) {
      const e = err instanceof BinaryError ? err : new BinaryError(String(err), "check the hutch.path setting");
      const pick = await vscode.window.showErrorMessage(`hutch: ${e.message}. Fix: ${e.fix}`, "Open Settings");
      if (pick) void vscode.commands.executeCommand("workbench.action.openSettings", "hutch.path");
      return;
    }
    const c = bridgeClient(bin, config());
    client = c;
    c.onNotification(IdeNotifications.changed, (ch: Change) => tree.apply(ch));
    c.onNotification(IdeNotifications.events, (n: EventsNotification) => panels.events(n));
    c.onNotification(IdeNotifications.subscriptionEnded, (n: SubscriptionEnded) => panels.ended(n));
    c.onNotification(IdeNotifications.daemon, (s: DaemonStatus) => {
      // Subscriptions survive a daemon restart inside the bridge; only the tree needs a fresh list.
      if (s.connected) void refresh();
      else {
        tree.disconnect();
        setConnected(false);
      }
    });
    c.onDidChangeState((e) => {
      // A restarted bridge (after a crash) starts with no subscriptions: the views ask again.
      if (e.newState === State.Running)
        void refresh()
          .finally(() => panels.resubscribeAll())
          .catch(() => undefined);
      if (e.newState === State.Stopped) {
        tree.disconnect();
        setConnected(false);
      }
    });
    await c.start();
    const info = c.initializeResult as { hutch?: { protocolVersion?: number } } | undefined;
    const proto = info?.hutch?.protocolVersion;
    if (proto !== IDE_PROTOCOL_VERSION) {
      void vscode.window.showErrorMessage(
        `hutch: ${bin.path} speaks IDE protocol ${proto ?? "(none)"}, this extension needs ${IDE_PROTOCOL_VERSION}. Fix: update hutch (bun run build) or set hutch.path to a matching binary`,
      );
    }
  };

  const conversations: ConversationDeps = { panels, invocation: (args) => quietInvocation(args), edits: new EditDocuments() };
  const ctx: Ctx = {
    tree,
    panels,
    conversation: (t) => showConversation(conversations, t),
    client: () => client,
    bin: () => bin,
    config,
    refresh,
  };
  // Verbs the extension runs as the CLI (offload, bring-back, ports): the bridge's binary, home and remote.
  const quietInvocation = (args: string[], cwd?: string): Invocation | undefined =>
    bin ? { bin: bin.path, args, cwd, env: { ...process.env, ...cliEnv(config()) } } : undefined;
  const invocation = (args: string[], cwd?: string): Invocation | undefined => {
    const inv = quietInvocation(args, cwd);
    if (!inv) void vscode.window.showErrorMessage("hutch: no hutch binary; fix the hutch.path setting");
    return inv;
  };
  context.subscriptions.push(
    ...registerOffload({ invocation, state: context.workspaceState }, new WorkspacesTree()),
    ...registerPorts({ invocation: quietInvocation, boxes: () => tree.allBoxes(), onBoxesChanged: tree.onDidChangeTreeData }),
    ...registerApprovals({ invocation: quietInvocation }),
    vscode.window.registerWebviewPanelSerializer(CONVERSATION_VIEW, conversationSerializer(conversations)),
    vscode.workspace.registerTextDocumentContentProvider(EDIT_SCHEME, conversations.edits),
    vscode.window.createTreeView<Node>("hutch.boxes", { treeDataProvider: tree, showCollapseAll: true }),
    status,
    ...registerCommands(ctx, () => void start()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("hutch")) void start();
    }),
    { dispose: () => void client?.dispose() },
  );
  await start();
}

function minVersion(context: vscode.ExtensionContext): string {
  return (context.extension.packageJSON as { hutch?: { minVersion?: string } }).hutch?.minVersion ?? "0.0.0";
}

export async function deactivate(): Promise<void> {
  await client?.dispose();
}
