// The sidebar: boxes, and under each its sessions. Kept current by the
// bridge's hutch/changed notifications; a full list only on (re)connect.
import * as vscode from "vscode";
import type { Box, Change, ListResult, SessionActivity, SessionView } from "@hutch/shared";

export type Node = { type: "box"; box: Box } | { type: "session"; session: SessionView };

const BOX_ICONS: Record<string, [string, string?]> = {
  running: ["vm-running", "testing.iconPassed"],
  stopped: ["vm-outline"],
  paused: ["debug-pause", "editorWarning.foreground"],
  starting: ["loading~spin"],
  stopping: ["loading~spin"],
  creating: ["loading~spin"],
  failed: ["error", "errorForeground"],
};

const ACTIVITY_ICONS: Record<SessionActivity, [string, string?]> = {
  busy: ["sync~spin"],
  idle: ["circle-outline"],
  "needs-input": ["bell-dot", "editorWarning.foreground"],
  error: ["error", "errorForeground"],
  closed: ["circle-slash", "disabledForeground"],
};

const icon = ([id, colour]: [string, string?]) => new vscode.ThemeIcon(id, colour ? new vscode.ThemeColor(colour) : undefined);

export class HutchTree implements vscode.TreeDataProvider<Node> {
  private readonly boxes = new Map<string, Box>();
  private readonly sessions = new Map<string, SessionView>();
  private readonly emitter = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  connected = false;

  /** Replaces everything (after a (re)connect). */
  reset(list: ListResult): void {
    this.connected = list.connected;
    this.boxes.clear();
    this.sessions.clear();
    for (const b of list.boxes) this.boxes.set(b.id, b);
    for (const s of list.sessions) this.sessions.set(s.id, s);
    this.emitter.fire(undefined);
  }

  disconnect(): void {
    this.connected = false;
    this.boxes.clear();
    this.sessions.clear();
    this.emitter.fire(undefined);
  }

  apply(c: Change): void {
    if (c.type === "box") this.boxes.set(c.box.id, c.box);
    else if (c.type === "box.removed") this.boxes.delete(c.id);
    else this.sessions.set(c.session.id, c.session);
    this.emitter.fire(undefined);
  }

  session(id: string): SessionView | undefined {
    return this.sessions.get(id);
  }

  openSessions(): SessionView[] {
    return [...this.sessions.values()].filter((s) => s.state === "open");
  }

  allBoxes(): Box[] {
    return [...this.boxes.values()];
  }

  getChildren(node?: Node): Node[] {
    if (!this.connected) return [];
    const byCreated = (a: { createdAt: string }, b: { createdAt: string }) => a.createdAt.localeCompare(b.createdAt);
    if (!node) {
      const boxes = [...this.boxes.values()].sort(byCreated).map((box): Node => ({ type: "box", box }));
      // Sessions outlive their box: those whose box is gone sit at the top level.
      const orphans = [...this.sessions.values()].filter((s) => !this.boxes.has(s.box)).sort(byCreated).map((session): Node => ({ type: "session", session }));
      return [...boxes, ...orphans];
    }
    if (node.type === "box") {
      return [...this.sessions.values()].filter((s) => s.box === node.box.id).sort(byCreated).map((session) => ({ type: "session", session }));
    }
    return [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.type === "box") {
      const b = node.box;
      // Always expandable: VS Code keeps a leaf a leaf when the same id later gains children.
      const item = new vscode.TreeItem(b.name, vscode.TreeItemCollapsibleState.Expanded);
      item.id = b.id;
      item.description = `${b.state} · ${b.engine} · ${b.isolation}`;
      item.iconPath = icon(BOX_ICONS[b.state] ?? ["question"]);
      item.contextValue = `box.${b.state}`;
      item.tooltip = new vscode.MarkdownString(`**${b.name}** \`${b.id}\`\n\n${b.state} (wants ${b.desired}) · ${b.engine} · ${b.isolation}${b.reason ? `\n\n${b.reason}` : ""}`);
      return item;
    }
    const s = node.session;
    const item = new vscode.TreeItem(s.label ?? s.id, vscode.TreeItemCollapsibleState.None);
    item.id = s.id;
    item.description = `${s.agent} · ${s.activity} · ${s.driver ? `driven by ${s.driver.actor.id}` : "no driver"}`;
    item.iconPath = icon(ACTIVITY_ICONS[s.activity] ?? ["question"]);
    item.contextValue = `session.${s.state}`;
    item.tooltip = new vscode.MarkdownString(`**${s.label ?? s.id}** \`${s.id}\`\n\nbox ${s.boxName} · ${s.agent} · ${s.activity} · ${s.lastSeq} events`);
    item.command = { command: "hutch.session.log", title: "Show Log", arguments: [node] };
    return item;
  }
}
