// Offload and bring back from the editor: the same `hutch offload` and
// `hutch bring-back` the CLI runs, on the open folder's repository (they work
// on this machine's files, so they run here, not in the bridge). Offload
// shows the dry-run list (what goes, what is held back) and goes only on
// confirm; bring-back shows which case happened and a diff of what came back.
// The offload records (`.git/hutch/<box>.json`) are the sidebar's list.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import * as vscode from "vscode";
import {
  AGENT_NAMES,
  BOX_NAME,
  BringBackOutput,
  check,
  OffloadOutput,
  OffloadRecordFile,
  pathMapper,
  RemoteList,
  Session,
  type AgentName,
} from "@hutch/shared";
import { runJson, type Invocation } from "./cli.ts";
import { showFailure } from "./errors.ts";
import { caseMessage, planRows, recordState, size } from "./workspace-view.ts";
import { count } from "@hutch/shared/text";

const exec = promisify(execFile);
/** The files a bring-back's diff view shows at most, and the bytes read of each side. */
const DIFF_FILES = 200;
const DIFF_BYTES = 4 * 1024 * 1024;
export const BEFORE_SCHEME = "hutch-before";
const BOX_NAME_RE = new RegExp(`^${BOX_NAME}$`);
/** workspaceState key: the daemon ("local" or a remote's name) each offload went to, so bring-back asks the same one. */
const TARGETS = "hutch.offloadTargets";

export interface WorkspaceNode {
  type: "workspace";
  root: string;
  record: OffloadRecordFile;
  state: ReturnType<typeof recordState>;
}

export interface OffloadHost {
  /** An invocation of the hutch binary with the extension's home and remote, or undefined (and an error shown). */
  invocation(args: string[], cwd?: string): Invocation | undefined;
  state: vscode.Memento;
}

async function gitDir(folder: string): Promise<{ root: string; gitDir: string } | undefined> {
  try {
    const { stdout } = await exec("git", ["rev-parse", "--show-toplevel", "--absolute-git-dir"], { cwd: folder });
    const [root, dir] = stdout.trim().split("\n");
    return root && dir ? { root, gitDir: dir } : undefined;
  } catch {
    return undefined;
  }
}

/** The offload records of every open folder's repository; one that does not parse or fit is skipped. */
async function readRecords(lastBack: Map<string, BringBackOutput>): Promise<WorkspaceNode[]> {
  const out: WorkspaceNode[] = [];
  const seen = new Set<string>();
  for (const f of vscode.workspace.workspaceFolders ?? []) {
    const repo = await gitDir(f.uri.fsPath);
    if (!repo || seen.has(repo.gitDir)) continue;
    seen.add(repo.gitDir);
    const names = await readdir(join(repo.gitDir, "hutch")).catch(() => [] as string[]);
    for (const n of names.filter((x) => x.endsWith(".json")).sort()) {
      const text = await readFile(join(repo.gitDir, "hutch", n), "utf8").catch(() => "");
      let v: unknown;
      try {
        v = JSON.parse(text);
      } catch {
        continue;
      }
      if (!check(OffloadRecordFile, v)) continue;
      out.push({ type: "workspace", root: repo.root, record: v, state: recordState(v, lastBack.get(`${repo.root}\0${v.box}`)) });
    }
  }
  return out;
}

/** Where the box's copy of an open folder's repository is, as a map from box paths to local ones; null when none was offloaded to it. */
export async function offloadPaths(box: string): Promise<((boxPath: string) => string | null) | null> {
  const n = (await readRecords(new Map())).find((w) => w.record.box === box);
  return n ? pathMapper(n.record.guestDir, n.root) : null;
}

const STATE_ICONS: Record<WorkspaceNode["state"], [string, string?]> = {
  sending: ["loading~spin"],
  offloaded: ["cloud-upload", "charts.blue"],
  "brought back": ["check", "testing.iconPassed"],
};

/** The "Offloaded workspaces" view: one row per offload record, with its state. */
export class WorkspacesTree implements vscode.TreeDataProvider<WorkspaceNode> {
  private nodes: WorkspaceNode[] = [];
  private readonly emitter = new vscode.EventEmitter<undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  readonly lastBack = new Map<string, BringBackOutput>();

  async refresh(): Promise<void> {
    this.nodes = await readRecords(this.lastBack);
    this.emitter.fire(undefined);
  }

  all(): WorkspaceNode[] {
    return this.nodes;
  }

  getChildren(node?: WorkspaceNode): WorkspaceNode[] {
    return node ? [] : this.nodes;
  }

  getTreeItem(n: WorkspaceNode): vscode.TreeItem {
    const r = n.record;
    const item = new vscode.TreeItem(r.box, vscode.TreeItemCollapsibleState.None);
    item.id = `${n.root}\0${r.box}`;
    const [iconId, colour] = STATE_ICONS[n.state];
    item.iconPath = new vscode.ThemeIcon(iconId, colour ? new vscode.ThemeColor(colour) : undefined);
    item.description = `${n.state} · ${r.branch} · ${basename(n.root)}`;
    item.contextValue = `workspace.${n.state.replace(" ", "-")}`;
    item.tooltip = new vscode.MarkdownString(
      `**${r.box}**: ${n.state}\n\n${n.root} (${r.branch} at \`${r.base.slice(0, 12)}\`) → \`${r.guestDir}\`\n\noffloaded ${r.at}${r.heldBack.length ? `\n\nheld back: ${r.heldBack.join(", ")}` : ""}`,
    );
    return item;
  }
}

/** Serves the pre-bring-back side of the diff view. */
class BeforeContent implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  set(uri: vscode.Uri, text: string): void {
    this.texts.set(uri.toString(), text);
  }
  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }
}

/** A file's content in a tree of the repository (the offload's baseline), or null when it has none there. */
async function blobAt(root: string, tree: string, path: string): Promise<string | null> {
  try {
    const { stdout } = await exec("git", ["-c", "core.hooksPath=/dev/null", "cat-file", "blob", `${tree}:${path}`], {
      cwd: root,
      maxBuffer: DIFF_BYTES,
    });
    return stdout;
  } catch {
    return null;
  }
}

export function registerOffload(host: OffloadHost, tree: WorkspacesTree): vscode.Disposable[] {
  const before = new BeforeContent();
  const watchers = (vscode.workspace.workspaceFolders ?? []).map((f) => {
    const w = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(f, ".git/hutch/*.json"));
    const again = () => void tree.refresh();
    w.onDidCreate(again);
    w.onDidChange(again);
    w.onDidDelete(again);
    return w;
  });
  void tree.refresh();

  return [
    vscode.workspace.registerTextDocumentContentProvider(BEFORE_SCHEME, before),
    vscode.window.createTreeView("hutch.workspaces", { treeDataProvider: tree }),
    vscode.commands.registerCommand("hutch.offload", () => offload(host, tree)),
    vscode.commands.registerCommand("hutch.bringBack", (node?: WorkspaceNode) => bringBack(host, tree, before, node)),
    vscode.commands.registerCommand("hutch.workspaces.refresh", () => tree.refresh()),
    vscode.workspace.onDidChangeWorkspaceFolders(() => void tree.refresh()),
    ...watchers,
  ];
}

async function pickFolder(): Promise<string | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length === 0) {
    void vscode.window.showInformationMessage("hutch: open a folder inside a git repository to offload it");
    return undefined;
  }
  if (folders.length === 1) return folders[0]!.uri.fsPath;
  const pick = await vscode.window.showWorkspaceFolderPick({ placeHolder: "Which folder's repository?" });
  return pick?.uri.fsPath;
}

async function pickTarget(host: OffloadHost, folder: string): Promise<string | undefined> {
  const inv = host.invocation(["remote", "list"], folder);
  if (!inv) return undefined;
  const remotes = await runJson(inv, RemoteList).catch(() => []);
  if (remotes.length === 0) return "local";
  const current = vscode.workspace.getConfiguration("hutch").get<string>("remote") || "local";
  const items = [
    { label: "local", description: "this machine's daemon", name: "local" },
    ...remotes.map((r) => ({ label: r.name, description: r.url, name: r.name })),
  ].sort((a, b) => (a.name === current ? -1 : b.name === current ? 1 : 0));
  const pick = await vscode.window.showQuickPick(items, { placeHolder: "Offload to which daemon?", ignoreFocusOut: true });
  return pick?.name;
}

/** The dry-run list; resolves true only on the confirm row. */
function confirmPlan(plan: OffloadOutput, target: string): Promise<boolean> {
  return new Promise((resolve) => {
    const qp = vscode.window.createQuickPick<vscode.QuickPickItem & { go?: boolean }>();
    qp.title = `Offload ${plan.root}: what goes, what is held back`;
    qp.placeholder = "Enter on the first row offloads; Escape cancels";
    qp.matchOnDescription = true;
    qp.ignoreFocusOut = true;
    qp.items = planRows(plan, target).map((r) =>
      r.kind === "separator"
        ? { label: r.label, kind: vscode.QuickPickItemKind.Separator }
        : {
            label: `${r.kind === "go" ? "$(cloud-upload)" : r.kind === "held" ? "$(lock)" : r.kind === "note" ? "$(info)" : "$(file)"} ${r.label}`,
            description: r.description,
            go: r.kind === "go",
          },
    );
    let done = false;
    qp.onDidAccept(() => {
      if (!qp.selectedItems[0]?.go) return;
      done = true;
      resolve(true);
      qp.hide();
    });
    qp.onDidHide(() => {
      if (!done) resolve(false);
      qp.dispose();
    });
    qp.show();
  });
}

const withRemote = (target: string, args: string[]) => ["--remote", target, ...args];
/** The daemon each offload went to, by "<root>\0<box>". */
const targets = (host: OffloadHost) => host.state.get<Record<string, string>>(TARGETS) ?? {};

async function offload(host: OffloadHost, tree: WorkspacesTree): Promise<void> {
  const folder = await pickFolder();
  if (!folder) return;
  const target = await pickTarget(host, folder);
  if (!target) return;
  const dry = host.invocation(["offload", "--dry-run"], folder);
  if (!dry) return;
  let plan: OffloadOutput;
  try {
    plan = await runJson(dry, OffloadOutput);
  } catch (err) {
    return showFailure("offload", err);
  }
  const asked = await askOffload(plan);
  if (!asked) return;
  const { box, agent, note } = asked;
  if (!(await confirmPlan({ ...plan, box }, target))) return;
  const inv = host.invocation(withRemote(target, ["offload", "--box", box]), folder);
  if (!inv) return;
  const done = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `hutch: offloading to box ${box}`, cancellable: true },
    (progress, token) =>
      runJson(inv, OffloadOutput, {
        onStep: (s) => progress.report({ message: s }),
        onChild: (c) => token.onCancellationRequested(() => c.kill("SIGTERM")),
      }).catch((err: unknown) => {
        // The journal makes a stopped offload safe to rerun: it resumes or redoes it.
        if (token.isCancellationRequested)
          void vscode.window.showInformationMessage(`hutch: offload to ${box} cancelled; run it again to finish it`);
        else showFailure(`offload to ${box}`, err);
        return undefined;
      }),
  );
  await tree.refresh();
  if (!done) return;
  await host.state.update(TARGETS, { ...targets(host), [`${done.root}\0${done.box}`]: target });
  const session = agent ? await startAgent(host, folder, target, box, agent, `offload ${plan.branch}`, note) : "";
  void vscode.window.showInformationMessage(
    `hutch: offloaded ${count(done.files.length, "file")} (${size(done.bytes)}) and ${done.branch} to box ${done.box}:${done.guestDir}${session}. Bring it back with hutch: Bring Back…`,
  );
}

/** The box, the agent to start there (none: only the work tree goes) and its hand-over note; undefined when the user cancels. */
async function askOffload(plan: OffloadOutput): Promise<{ box: string; agent: AgentName | undefined; note: string } | undefined> {
  const box = await vscode.window.showInputBox({
    prompt: "Box to offload into (created when missing)",
    value: plan.box,
    ignoreFocusOut: true,
    validateInput: (v) => (BOX_NAME_RE.test(v) ? null : "lowercase letters, digits and dashes; starts with a letter or digit"),
  });
  if (!box) return undefined;
  const agent = await vscode.window.showQuickPick(
    [
      { label: "no agent", description: "only the work tree goes", name: undefined as AgentName | undefined },
      ...AGENT_NAMES.map((n) => ({
        label: n,
        description: "started in the box on the offloaded work",
        name: n as AgentName | undefined,
      })),
    ],
    { placeHolder: "Start an agent in the box?", ignoreFocusOut: true },
  );
  if (!agent) return undefined;
  let note = "";
  if (agent.name && agent.name !== "shell") {
    const n = await vscode.window.showInputBox({
      prompt: `A hand-over note for ${agent.name} (its first prompt; empty: an interactive session)`,
      ignoreFocusOut: true,
    });
    if (n === undefined) return undefined;
    note = n;
  }
  return { box, agent: agent.name, note };
}

/** Starts the agent in the box, detached; returns the words the final message adds ("" when it did not start). */
async function startAgent(
  host: OffloadHost,
  folder: string,
  target: string,
  box: string,
  agent: AgentName,
  label: string,
  note: string,
): Promise<string> {
  const run = host.invocation(
    withRemote(target, ["run", box, "--agent", agent, "--detach", "--label", label, ...(note ? ["--prompt", note] : [])]),
    folder,
  );
  const s = run ? await runJson(run, Session).catch((err: unknown) => void showFailure(`start ${agent} in ${box}`, err)) : undefined;
  return s ? `; ${agent} runs in session ${s.id}` : "";
}

async function pickRecord(tree: WorkspacesTree, node?: WorkspaceNode): Promise<WorkspaceNode | undefined> {
  if (node?.type === "workspace") return node;
  await tree.refresh();
  const all = tree.all().filter((n) => n.state !== "sending");
  if (all.length === 0) {
    void vscode.window.showInformationMessage("hutch: nothing offloaded from the open folders; run hutch: Offload Workspace to Box… first");
    return undefined;
  }
  if (all.length === 1) return all[0];
  const pick = await vscode.window.showQuickPick(
    all.map((n) => ({ label: n.record.box, description: `${n.state} · ${n.record.branch} · ${n.root}`, n })),
    { placeHolder: "Bring back from which box?", ignoreFocusOut: true },
  );
  return pick?.n;
}

/** The files a bring-back changed, each against what the work tree held before it. */
async function showDiff(before: BeforeContent, r: BringBackOutput, baseline: string): Promise<void> {
  const files = r.files.slice(0, DIFF_FILES);
  if (files.length === 0) return;
  // [resource, before (none: the box added it), after (none: the box deleted it)], as the SCM view passes them.
  const rows: [vscode.Uri, vscode.Uri | undefined, vscode.Uri | undefined][] = [];
  const stamp = Date.now();
  for (const f of files) {
    const path = join(r.root, f);
    const after = vscode.Uri.file(path);
    const was = vscode.Uri.from({ scheme: BEFORE_SCHEME, path, query: `${r.box}@${stamp}` });
    const text = await blobAt(r.root, baseline, f);
    before.set(was, text ?? "");
    rows.push([after, text === null ? undefined : was, existsSync(path) ? after : undefined]);
  }
  const title = `hutch: brought back from ${r.box} (${r.case})`;
  if (rows.length === 1) {
    const [resource, was, now] = rows[0]!;
    // Either side may be absent (added, deleted); vscode.diff needs two documents: an empty one stands in.
    const empty = vscode.Uri.from({ scheme: BEFORE_SCHEME, path: resource.fsPath, query: "absent" });
    await vscode.commands.executeCommand("vscode.diff", was ?? empty, now ?? empty, `${title}: ${files[0]}`);
  } else await vscode.commands.executeCommand("vscode.changes", title, rows);
}

async function bringBack(host: OffloadHost, tree: WorkspacesTree, before: BeforeContent, node?: WorkspaceNode): Promise<void> {
  const n = await pickRecord(tree, node);
  if (!n) return;
  const box = n.record.box;
  // The baseline the box's changes are a difference from: what the work tree held for them before this bring-back.
  const baseline = n.record.workTree;
  const target = targets(host)[`${n.root}\0${box}`];
  const inv = host.invocation(target ? withRemote(target, ["bring-back", box]) : ["bring-back", box], n.root);
  if (!inv) return;
  const r = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `hutch: bringing back from box ${box}` },
    (progress) =>
      runJson(inv, BringBackOutput, { onStep: (s) => progress.report({ message: s }) }).catch((err: unknown) => {
        showFailure(`bring back from ${box}`, err);
        return undefined;
      }),
  );
  if (!r) return;
  tree.lastBack.set(`${n.root}\0${box}`, r);
  await tree.refresh();
  if (r.case === "fast-forward" || r.case === "merge") await showDiff(before, r, baseline);
  const actions = r.case === "branch" && r.commands?.length ? ["Copy Commands"] : [];
  const pick = await vscode.window.showInformationMessage(`hutch: ${caseMessage(r)}`, ...actions);
  if (pick === "Copy Commands") await vscode.env.clipboard.writeText((r.commands ?? []).join("\n"));
}
