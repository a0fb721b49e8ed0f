// The Ports view, in VS Code's own Ports-view manner: every port a running
// box listens on (`hutch port list`), Forward Port, Open in Browser, Stop
// Forwarding. A forward is a child `hutch port forward BOX REMOTE --json`
// (the CLI holds the listener, on 127.0.0.1 only), the same local port when
// nothing here holds it (the CLI refuses a port anything answers on, on
// 127.0.0.1 or [::1]), any free one otherwise: the user picked this port, so
// it is not --auto's free-port rule; it lives as long as the extension (the
// children are killed on deactivate) or until Stop Forwarding. The list is
// read every few seconds while the view is visible: listeners have no feed.
import { spawn, type ChildProcess } from "node:child_process";
import * as vscode from "vscode";
import { check, PortForwardLine, PortListResult, type Box, type ListeningPort } from "@hutch/shared";
import { failure, lineSplitter, runJson, type CliError, type Invocation } from "./cli.ts";
import { showFailure } from "./errors.ts";

const POLL_MS = 3000;

export interface PortNode {
  type: "port";
  box: string;
  port: number;
  address: string;
  listening: boolean;
  process?: ListeningPort["process"];
}

interface Forwarded {
  local: number;
  child: ChildProcess;
}

export interface PortsHost {
  invocation(args: string[]): Invocation | undefined;
  boxes(): Box[];
  onBoxesChanged: vscode.Event<unknown>;
}

const key = (box: string, port: number) => `${box}:${port}`;

/** Starts `hutch port forward` and resolves with its first line, or rejects with its error if it ends first. */
function startForward(inv: Invocation): Promise<Forwarded> {
  return new Promise((resolve, reject) => {
    const child = spawn(inv.bin, [...inv.args, "--json"], { env: inv.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let settled = false;
    child.stdout.setEncoding("utf8").on(
      "data",
      lineSplitter((l) => {
        stdout += `${l}\n`;
        let v: unknown;
        try {
          v = JSON.parse(l);
        } catch {
          return;
        }
        if (!settled && check(PortForwardLine, v) && v.type === "forwarded") {
          settled = true;
          resolve({ local: v.local, child });
        }
      }),
    );
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      if (stderr.length < 65536) stderr += d;
    });
    child.on("error", (err) => {
      if (!settled) reject(err);
      settled = true;
    });
    child.on("close", (code) => {
      if (!settled) reject(failure(stdout.trim().split("\n").pop() ?? "", stderr, code, "hutch port forward"));
      settled = true;
    });
  });
}

export class PortsTree implements vscode.TreeDataProvider<PortNode> {
  private listed = new Map<string, ListeningPort[]>();
  private readonly forwards = new Map<string, Forwarded>();
  private readonly emitter = new vscode.EventEmitter<undefined>();
  readonly onDidChangeTreeData = this.emitter.event;

  constructor(private readonly host: PortsHost) {}

  private reading: Promise<void> | undefined;

  /** Reads every running box's list; a call while one is reading waits for it (a slow machine does not pile them up). */
  refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(): Promise<void> {
    const running = this.host.boxes().filter((b) => b.state === "running");
    const next = new Map<string, ListeningPort[]>();
    await Promise.all(
      running.map(async (b) => {
        const inv = this.host.invocation(["port", "list", b.name]);
        if (!inv) return;
        next.set(b.name, await runJson(inv, PortListResult).catch(() => this.listed.get(b.name) ?? []));
      }),
    );
    const changed = JSON.stringify([...next]) !== JSON.stringify([...this.listed]);
    this.listed = next;
    if (changed) this.emitter.fire(undefined);
  }

  forwarded(n: PortNode): number | undefined {
    return this.forwards.get(key(n.box, n.port))?.local;
  }

  async forward(n: PortNode): Promise<number> {
    const known = this.forwarded(n);
    if (known) return known;
    const attempt = (spec: string) => {
      const inv = this.host.invocation(["port", "forward", n.box, spec]);
      if (!inv) throw new Error("no hutch binary; fix the hutch.path setting");
      return startForward(inv);
    };
    // The same port here when it is free (as VS Code's Ports view does), else any free one.
    const f = await attempt(String(n.port)).catch((err: CliError) => {
      if (err.code === "conflict") return attempt(`0:${n.port}`);
      throw err;
    });
    this.forwards.set(key(n.box, n.port), f);
    f.child.on("close", () => {
      if (this.forwards.get(key(n.box, n.port)) === f) this.forwards.delete(key(n.box, n.port));
      this.emitter.fire(undefined);
    });
    this.emitter.fire(undefined);
    return f.local;
  }

  stop(n: PortNode): void {
    const f = this.forwards.get(key(n.box, n.port));
    if (!f) return;
    this.forwards.delete(key(n.box, n.port));
    f.child.kill("SIGTERM");
    this.emitter.fire(undefined);
  }

  dispose(): void {
    for (const f of this.forwards.values()) f.child.kill("SIGTERM");
    this.forwards.clear();
  }

  getChildren(node?: PortNode): PortNode[] {
    if (node) return [];
    const rows: PortNode[] = [];
    for (const [box, ports] of this.listed) {
      for (const p of ports)
        if (!rows.some((r) => r.box === box && r.port === p.port))
          rows.push({ type: "port", box, port: p.port, address: p.address, listening: true, process: p.process });
    }
    // A forward outlives its listener (VS Code keeps the row too): shown until stopped.
    for (const k of this.forwards.keys()) {
      const [box, port] = [k.slice(0, k.lastIndexOf(":")), Number(k.slice(k.lastIndexOf(":") + 1))];
      if (!rows.some((r) => r.box === box && r.port === port)) rows.push({ type: "port", box, port, address: "", listening: false });
    }
    return rows.sort((a, b) => a.box.localeCompare(b.box) || a.port - b.port);
  }

  getTreeItem(n: PortNode): vscode.TreeItem {
    const local = this.forwarded(n);
    const item = new vscode.TreeItem(String(n.port), vscode.TreeItemCollapsibleState.None);
    item.id = key(n.box, n.port);
    item.iconPath = new vscode.ThemeIcon(local ? "radio-tower" : "plug", local ? new vscode.ThemeColor("charts.green") : undefined);
    const proc = n.process ? ` · ${n.process.name} (${n.process.pid})` : "";
    const where = n.listening ? `${n.box} · ${n.address}${proc}` : `${n.box} · not listening`;
    item.description = local ? `${where} → 127.0.0.1:${local}` : `${where} · not forwarded`;
    item.contextValue = local ? "port.forwarded" : "port";
    item.tooltip = local
      ? `box ${n.box}, port ${n.port} (bound to ${n.address || "?"}), forwarded to http://127.0.0.1:${local}/`
      : `box ${n.box}, port ${n.port} (bound to ${n.address}); Forward Port makes it reachable here`;
    return item;
  }
}

export function registerPorts(host: PortsHost): vscode.Disposable[] {
  const tree = new PortsTree(host);
  const view = vscode.window.createTreeView("hutch.ports", { treeDataProvider: tree });
  let timer: ReturnType<typeof setInterval> | undefined;
  const poll = () => {
    if (timer) clearInterval(timer);
    timer = undefined;
    if (!view.visible) return;
    void tree.refresh();
    timer = setInterval(() => void tree.refresh(), POLL_MS);
  };
  poll();

  const open = async (local: number) => {
    const uri = await vscode.env.asExternalUri(vscode.Uri.parse(`http://127.0.0.1:${local}/`));
    await vscode.env.openExternal(uri);
  };
  const pickPort = async (node?: PortNode): Promise<PortNode | undefined> => {
    if (node?.type === "port") return node;
    await tree.refresh();
    const rows = tree.getChildren();
    if (rows.length === 0) return void vscode.window.showInformationMessage("hutch: nothing listens in a running box");
    const pick = await vscode.window.showQuickPick(
      rows.map((r) => ({ label: String(r.port), description: `${r.box} · ${r.address}`, r })),
      { placeHolder: "Which port?" },
    );
    return pick?.r;
  };

  return [
    view,
    tree,
    view.onDidChangeVisibility(poll),
    host.onBoxesChanged(() => view.visible && void tree.refresh()),
    { dispose: () => timer && clearInterval(timer) },
    vscode.commands.registerCommand("hutch.ports.refresh", () => tree.refresh()),
    vscode.commands.registerCommand("hutch.port.forward", async (node?: PortNode) => {
      const n = await pickPort(node);
      if (!n) return;
      await tree.forward(n).then(
        (local) => vscode.window.setStatusBarMessage(`hutch: ${n.box}:${n.port} forwarded to 127.0.0.1:${local}`, 5000),
        (err) => showFailure(`forward ${n.box}:${n.port}`, err),
      );
    }),
    vscode.commands.registerCommand("hutch.port.open", async (node?: PortNode) => {
      const n = await pickPort(node);
      if (!n) return;
      await tree.forward(n).then(open, (err) => showFailure(`forward ${n.box}:${n.port}`, err));
    }),
    vscode.commands.registerCommand("hutch.port.stop", (node?: PortNode) => {
      if (node?.type === "port") tree.stop(node);
    }),
  ];
}
