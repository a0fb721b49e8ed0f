// The sidebar: boxes, and under each its sessions. In a fleet (boxes that
// name their server) the boxes sit under one row per server. Kept current by
// the bridge's hutch/changed notifications; a full list only on (re)connect.
//
// Each box and session has one node object for as long as it is listed,
// updated in place, and a change fires only the nodes it touched: VS Code
// finds a fired element by identity, and a refresh of a node (the root most
// of all) forgets its descendants until they are fetched again, so a click in
// flight on a row that was not refreshed still resolves to its node.
import * as vscode from "vscode";
import type { Box, Change, ListResult, SessionActivity, SessionView } from "@hutch/shared";
import { count, terminalText } from "@hutch/shared/text";
import { dispatchDescription, dispatchOf, workerOf, workersOf } from "./dispatch-group.ts";
import { groupByServer, keepServer } from "./server-group.ts";
import { sessionDescription, sessionTitle } from "./session-name.ts";

export type BoxNode = { type: "box"; box: Box };
export type SessionNode = { type: "session"; session: SessionView };
/** A fleet's server, its boxes under it (./server-group.ts). */
export type ServerNode = { type: "server"; name: string };
export type Node = BoxNode | SessionNode | ServerNode;

const BOX_ICONS: Record<string, [string, string?]> = {
  running: ["vm-running", "testing.iconPassed"],
  stopped: ["vm-outline"],
  paused: ["debug-pause", "editorWarning.foreground"],
  // Asleep: no process on the host, its state on disk; anything that needs it (attach, a session) wakes it.
  asleep: ["coffee", "descriptionForeground"],
  sleeping: ["loading~spin"],
  waking: ["loading~spin"],
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
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
// Labels, reasons and drivers' ids are written by others (a sharer's session label, a box's failure):
// shown escaped, and in a tooltip as text, never as Markdown (a link or an image there is someone else's).
const shown = (s: string) => terminalText(s, { oneLine: true });
const tooltip = (bold: string, code: string, rest: string) =>
  new vscode.MarkdownString().appendMarkdown("**").appendText(shown(bold)).appendMarkdown("** ").appendText(`${code}\n\n${rest}`);

/** What one update touched: the root's children, or these nodes (each with its children). */
class Touched {
  root = false;
  readonly nodes = new Set<Node>();
}

export class HutchTree implements vscode.TreeDataProvider<Node> {
  private readonly boxes = new Map<string, BoxNode>();
  private readonly sessions = new Map<string, SessionNode>();
  /** One node per server for as long as a box names it (VS Code finds a fired element by identity). */
  private readonly servers = new Map<string, ServerNode>();
  private readonly emitter = new vscode.EventEmitter<Node | Node[] | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  connected = false;

  /** Brings the tree to a full list (after a (re)connect or a refresh), firing only what differs. */
  reset(list: ListResult): void {
    const t = new Touched();
    if (list.connected !== this.connected) t.root = true;
    this.connected = list.connected;
    const boxIds = new Set(list.boxes.map((b) => b.id));
    const sessionIds = new Set(list.sessions.map((s) => s.id));
    for (const id of [...this.sessions.keys()]) if (!sessionIds.has(id)) this.removeSession(id, t);
    for (const id of [...this.boxes.keys()]) if (!boxIds.has(id)) this.removeBox(id, t);
    for (const b of list.boxes) this.setBox(b, t);
    for (const s of list.sessions) this.setSession(s, t);
    this.fire(t);
  }

  disconnect(): void {
    const had = this.connected || this.boxes.size > 0 || this.sessions.size > 0;
    this.connected = false;
    this.boxes.clear();
    this.sessions.clear();
    this.servers.clear();
    if (had) this.emitter.fire(undefined);
  }

  apply(c: Change): void {
    const t = new Touched();
    if (c.type === "box") this.setBox(c.box, t);
    else if (c.type === "box.removed") this.removeBox(c.id, t);
    else this.setSession(c.session, t);
    this.fire(t);
  }

  session(id: string): SessionView | undefined {
    return this.sessions.get(id)?.session;
  }

  openSessions(): SessionView[] {
    return [...this.sessions.values()].map((n) => n.session).filter((s) => s.state === "open");
  }

  /** Every session the sidebar knows (open and closed, every box), newest first: the conversation history. */
  allSessions(): SessionView[] {
    return [...this.sessions.values()].map((n) => n.session).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  }

  allBoxes(): Box[] {
    return [...this.boxes.values()].map((n) => n.box);
  }

  getChildren(node?: Node): Node[] {
    if (!this.connected) return [];
    const byCreated = (a: { createdAt: string }, b: { createdAt: string }) => a.createdAt.localeCompare(b.createdAt);
    if (!node) {
      const boxes = [...this.boxes.values()].sort((a, b) => byCreated(a.box, b.box));
      // Sessions outlive their box: those whose box is gone sit at the top level (a dispatch's workers under it).
      const orphans = [...this.sessions.values()]
        .filter((n) => this.parentOf(n.session) === undefined)
        .sort((a, b) => byCreated(a.session, b.session));
      // In a fleet the boxes sit under their servers; boxes naming none (every box outside a fleet) stay at the top.
      const { servers, rest } = groupByServer(boxes.map((n) => n.box));
      return [...servers.map((s) => this.serverNode(s.name)), ...rest.map((b) => this.boxes.get(b.id)!), ...orphans];
    }
    if (node.type === "server") {
      return [...this.boxes.values()].filter((n) => n.box.server === node.name).sort((a, b) => byCreated(a.box, b.box));
    }
    if (node.type === "box") {
      return [...this.sessions.values()].filter((n) => this.parentOf(n.session) === node).sort((a, b) => byCreated(a.session, b.session));
    }
    const dispatch = dispatchOf(node.session);
    return dispatch
      ? workersOf(
          dispatch,
          [...this.sessions.values()].map((n) => n.session),
        ).map((s) => this.sessions.get(s.id)!)
      : [];
  }

  getParent(node: Node): Node | undefined {
    if (node.type === "box") return node.box.server ? this.serverNode(node.box.server) : undefined;
    return node.type === "session" ? this.parentOf(node.session) : undefined;
  }

  /** The server's node, the same object while any box names it. */
  private serverNode(name: string): ServerNode {
    let n = this.servers.get(name);
    if (!n) {
      n = { type: "server", name };
      this.servers.set(name, n);
    }
    return n;
  }

  /** A dispatch worker's session sits under its dispatch when that is listed, any other under its box (if listed). */
  private parentOf(session: SessionView): Node | undefined {
    const w = workerOf(session);
    const group = w && [...this.sessions.values()].find((n) => dispatchOf(n.session) === w.dispatch);
    return group ?? this.boxes.get(session.box);
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.type === "server") {
      const boxes = [...this.boxes.values()].filter((n) => n.box.server === node.name).length;
      const item = new vscode.TreeItem(shown(node.name), vscode.TreeItemCollapsibleState.Expanded);
      item.id = `server:${node.name}`;
      item.description = count(boxes, "box", "boxes");
      item.iconPath = new vscode.ThemeIcon("server");
      item.contextValue = "server";
      item.tooltip = tooltip(node.name, "", `the fleet's server ${shown(node.name)}: ${count(boxes, "box", "boxes")} run there`);
      return item;
    }
    if (node.type === "box") {
      const b = node.box;
      // Always expandable: VS Code keeps a leaf a leaf when the same id later gains children.
      const item = new vscode.TreeItem(shown(b.name), vscode.TreeItemCollapsibleState.Expanded);
      item.id = b.id;
      item.description = `${b.state} · ${b.engine} · ${b.isolation}`;
      item.iconPath = icon(BOX_ICONS[b.state] ?? ["question"]);
      item.contextValue = `box.${b.state}`;
      item.tooltip = tooltip(
        b.name,
        b.id,
        `${b.state} (wants ${b.desired}) · ${b.engine} · ${b.isolation}${b.reason ? `\n\n${terminalText(b.reason)}` : ""}`,
      );
      return item;
    }
    const s = node.session;
    const dispatch = dispatchOf(s);
    const item = new vscode.TreeItem(
      shown(sessionTitle(s)),
      dispatch ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None,
    );
    item.id = s.id;
    item.description = dispatch
      ? dispatchDescription(
          s,
          workersOf(
            dispatch,
            [...this.sessions.values()].map((n) => n.session),
          ),
        )
      : `${shown(sessionDescription(s, Date.now()))} · ${s.activity}${s.driver ? ` · driven by ${shown(s.driver.actor.id)}` : ""}`;
    item.iconPath = icon(ACTIVITY_ICONS[s.activity] ?? ["question"]);
    item.contextValue = `session.${s.state}.${s.agent === "shell" ? "shell" : "agent"}`;
    item.tooltip = tooltip(
      sessionTitle(s),
      s.id,
      `box ${shown(s.boxName)} · ${s.agent} · ${s.activity} · ${count(s.lastSeq, "event")} · started ${s.createdAt}${s.first && s.label ? `\n\n${terminalText(s.first)}` : ""}`,
    );
    item.command = { command: "hutch.session.log.row", title: "Show Log", arguments: [node] };
    return item;
  }

  private setBox(update: Box, t: Touched): void {
    const known = this.boxes.get(update.id);
    const box = keepServer(known?.box, update);
    if (!known) {
      this.boxes.set(box.id, { type: "box", box });
      t.root = true;
      return;
    }
    if (same(known.box, box)) return;
    // A box that starts naming its server moves under it: the top level is drawn again.
    if (known.box.server !== box.server) t.root = true;
    known.box = box;
    t.nodes.add(known);
  }

  private removeBox(id: string, t: Touched): void {
    const known = this.boxes.get(id);
    if (!known) return;
    this.boxes.delete(id);
    const server = known.box.server;
    if (server && ![...this.boxes.values()].some((n) => n.box.server === server)) this.servers.delete(server);
    t.root = true;
  }

  private setSession(session: SessionView, t: Touched): void {
    const known = this.sessions.get(session.id);
    if (known) {
      if (same(known.session, session)) return;
      known.session = session;
      t.nodes.add(known);
      // A worker's activity shows in its dispatch's description too.
      const group = this.parentOf(session);
      if (group?.type === "session") t.nodes.add(group);
      return;
    }
    this.sessions.set(session.id, { type: "session", session });
    // A new dispatch takes its workers from their boxes: the whole tree is redrawn.
    const parent = dispatchOf(session) ? undefined : this.parentOf(session);
    if (parent) t.nodes.add(parent);
    else t.root = true;
  }

  private removeSession(id: string, t: Touched): void {
    const known = this.sessions.get(id);
    if (!known) return;
    const parent = dispatchOf(known.session) ? undefined : this.parentOf(known.session);
    this.sessions.delete(id);
    if (parent) t.nodes.add(parent);
    else t.root = true;
  }

  private fire(t: Touched): void {
    if (t.root) this.emitter.fire(undefined);
    else if (t.nodes.size) this.emitter.fire([...t.nodes]);
  }
}
