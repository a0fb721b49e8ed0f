// What an agent's tool call is, read from its name and input the way every
// agent CLI spells them (Claude Code's Bash, Write, Edit, MultiEdit and
// TodoWrite; Codex's shell, file_change and todo_list; opencode's and pi's
// bash, write and edit): its kind, a one-line title, the files it names, the
// edits it makes and a to-do list as a plan. One reading for every client
// that shows a conversation (`hutch acp`, the VS Code conversation view).
// Inputs come from the box: read, never trusted.

/** What a tool does, in the Agent Client Protocol's words. */
export type ToolKind = "read" | "edit" | "delete" | "move" | "search" | "execute" | "think" | "fetch" | "switch_mode" | "other";

/** Tool names as the agent CLIs call them, by what they do. */
const KINDS: [RegExp, ToolKind][] = [
  [/^(bash|shell|shell_command|exec_command|command_execution|local_shell)$/i, "execute"],
  [/^(write|edit|multiedit|notebookedit|file_change|apply_patch|patch)$/i, "edit"],
  [/^(read|view|cat|read_file)$/i, "read"],
  [/^(grep|glob|find|ls|list|search|toolsearch|web_search|websearch)$/i, "search"],
  [/^(webfetch|fetch)$/i, "fetch"],
  [/^(todowrite|todo_list|todoread|task|exitplanmode)$/i, "think"],
  [/^(delete|rm)$/i, "delete"],
  [/^(move|mv|rename)$/i, "move"],
];

export function toolKind(name: string): ToolKind {
  for (const [re, kind] of KINDS) if (re.test(name)) return kind;
  return "other";
}

const obj = (v: unknown): Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The file a tool's input names, whichever key the agent uses. */
function fileOf(input: Record<string, unknown>): string | undefined {
  return str(input.file_path) ?? str(input.path) ?? str(input.filePath) ?? str(input.notebook_path);
}

/** One line saying what the tool does: the command it runs, the file it touches, or its name. */
export function toolTitle(name: string, input: unknown): string {
  const i = obj(input);
  const command = Array.isArray(i.command) ? i.command.map(String).join(" ") : (str(i.command) ?? str(i.cmd));
  const file = fileOf(i);
  const title = command
    ? `${command}`
    : file
      ? `${name} ${file}`
      : str(i.pattern)
        ? `${name} ${str(i.pattern)}`
        : str(i.url)
          ? `${name} ${str(i.url)}`
          : (str(i.description) ?? name);
  const line = title.split("\n")[0]!;
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

/** One edit of a file: the text replaced (null: the whole file written) and its replacement, the path as the box names it. */
export interface ToolEdit {
  path: string;
  oldText: string | null;
  newText: string;
}

/** The edits a tool's input describes (Write, Edit and MultiEdit; write and edit). */
export function toolEdits(name: string, input: unknown): ToolEdit[] {
  const i = obj(input);
  const path = fileOf(i);
  if (!path || toolKind(name) !== "edit") return [];
  if (typeof i.content === "string") return [{ path, oldText: null, newText: i.content }];
  const oldText = str(i.old_string) ?? str(i.oldString) ?? str(i.oldText);
  const newText = str(i.new_string) ?? str(i.newString) ?? str(i.newText);
  if (newText !== undefined) return [{ path, oldText: oldText ?? null, newText }];
  if (Array.isArray(i.edits))
    return i.edits.flatMap((e) => {
      const d = obj(e);
      const n = str(d.new_string) ?? str(d.newText);
      return n === undefined ? [] : [{ path, oldText: str(d.old_string) ?? str(d.oldText) ?? null, newText: n }];
    });
  return [];
}

/** The files a tool's input names (with the line it starts at, when it says), for a client to follow along. */
export function toolFiles(name: string, input: unknown): { path: string; line?: number }[] {
  const i = obj(input);
  const file = fileOf(i);
  if (file) return [{ path: file, ...(typeof i.offset === "number" && i.offset > 0 ? { line: i.offset } : {}) }];
  if (name === "file_change" && Array.isArray(i.changes))
    return i.changes.flatMap((c) => (str(obj(c).path) ? [{ path: str(obj(c).path)! }] : []));
  return [];
}

export type PlanStatus = "pending" | "in_progress" | "completed";
const PLAN_STATUS: Record<string, PlanStatus> = { pending: "pending", in_progress: "in_progress", completed: "completed" };

/** A to-do list tool's input as a plan (Claude Code's TodoWrite, Codex's todo_list), else null. */
export function planOf(name: string, input: unknown): { content: string; status: PlanStatus }[] | null {
  const i = obj(input);
  if (/^todowrite$/i.test(name) && Array.isArray(i.todos))
    return i.todos.map((t) => {
      const d = obj(t);
      return { content: str(d.content) ?? "", status: PLAN_STATUS[str(d.status) ?? ""] ?? "pending" };
    });
  if (name === "todo_list" && Array.isArray(i.items))
    return i.items.map((t) => {
      const d = obj(t);
      return { content: str(d.text) ?? "", status: d.completed === true ? "completed" : "pending" };
    });
  return null;
}
