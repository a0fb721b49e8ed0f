// A CDP accessibility tree as the ref-tagged list agents already know from
// Playwright: `- button "Save" [ref=e3]`, children indented two spaces.
// Pure: the tab hands in the nodes of each frame and a ref allocator, so the
// format is table-tested without a browser. What keeps it small: ignored and
// unnamed generic nodes are lifted into their parent, a text child that only
// repeats its parent's name is dropped, and only elements one can act on get
// a ref. Every name is cut to NAME_MAX, so one huge label cannot blow it up.

/** The fields of a CDP `Accessibility.AXNode` this reads. */
export interface AXNode {
  nodeId: string;
  ignored: boolean;
  role?: { value?: unknown };
  name?: { value?: unknown };
  value?: { value?: unknown };
  properties?: { name: string; value: { value?: unknown } }[];
  childIds?: string[];
  backendDOMNodeId?: number;
}

export interface SnapshotInput {
  /** The nodes of the tab's main frame, root first (Accessibility.getFullAXTree). */
  nodes: AXNode[];
  /** The nodes of the document inside an iframe element, by that element's backend node id. */
  frames: Map<number, AXNode[]>;
  /** The ref for an element, stable for the document's life. */
  ref(backendNodeId: number): string;
}

const NAME_MAX = 300;
/** A frame nested deeper than this is not descended into (a page that frames itself). */
const FRAME_DEPTH_MAX = 8;

/** Roles an agent acts on: they get a ref. */
const ACTIONABLE = new Set([
  "button",
  "link",
  "textbox",
  "searchbox",
  "checkbox",
  "radio",
  "combobox",
  "listbox",
  "option",
  "menuitem",
  "menuitemcheckbox",
  "menuitemradio",
  "tab",
  "switch",
  "slider",
  "spinbutton",
  "treeitem",
  "iframe",
]);
/** Roles that say nothing by themselves: without a name they are lifted into their parent. */
const TRANSPARENT = new Set(["generic", "none", "presentation", "group", "labeltext", "section", "div", "menulistpopup"]);
/** A document's root: its name is the title, which the result carries already. */
const LIFTED = new Set(["rootwebarea", "webarea"]);
const SKIP = new Set(["inlinetextbox", "linebreak", "listmarker"]);
/** Fields whose content is their value: shown after a colon, their text children not listed. */
const FIELDS = new Set(["textbox", "searchbox", "spinbutton"]);
const STATES = ["level", "checked", "pressed", "selected", "expanded", "disabled", "required"] as const;

function str(v: unknown): string {
  return typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "";
}

function cut(s: string): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > NAME_MAX ? `${one.slice(0, NAME_MAX)}…` : one;
}

function quote(s: string): string {
  return JSON.stringify(s);
}

/** The snapshot's lines, in document order. */
export function snapshotLines(input: SnapshotInput): string[] {
  const out: string[] = [];
  emitTree(input.nodes, input, 0, 0, out, "");
  return out;
}

function emitTree(nodes: AXNode[], input: SnapshotInput, indent: number, frameDepth: number, out: string[], parentName: string): void {
  const byId = new Map(nodes.map((n) => [n.nodeId, n]));
  const root = nodes[0];
  if (!root) return;
  const walk = (node: AXNode, depth: number, inheritedName: string): void => {
    const role = str(node.role?.value).toLowerCase();
    const kids = (node.childIds ?? []).flatMap((id) => byId.get(id) ?? []);
    if (SKIP.has(role)) return;
    const name = cut(str(node.name?.value));
    if (role === "statictext") {
      if (name && name !== inheritedName) out.push(`${pad(depth)}- text: ${quote(name)}`);
      return;
    }
    const frameNodes = role === "iframe" && node.backendDOMNodeId !== undefined ? input.frames.get(node.backendDOMNodeId) : undefined;
    if (node.ignored || LIFTED.has(role) || (TRANSPARENT.has(role) && !name && !frameNodes)) {
      for (const k of kids) walk(k, depth, inheritedName);
      return;
    }
    out.push(`${pad(depth)}- ${line(node, role, name, input)}`);
    const mark = out.length - 1;
    if (!FIELDS.has(role)) for (const k of kids) walk(k, depth + 1, name);
    if (frameNodes && frameDepth < FRAME_DEPTH_MAX) emitTree(frameNodes, input, depth + 1, frameDepth + 1, out, "");
    if (out.length > mark + 1) out[mark] += ":";
    else if (out.length === mark + 1) inlineValue(out, mark, node);
  };
  walk(root, indent, parentName);
}

function pad(depth: number): string {
  return "  ".repeat(depth);
}

function line(node: AXNode, role: string, name: string, input: SnapshotInput): string {
  let s = name ? `${role} ${quote(name)}` : role;
  for (const p of node.properties ?? []) {
    if (!(STATES as readonly string[]).includes(p.name)) continue;
    const v = p.value.value;
    if (v === false || v === undefined || v === "false") continue;
    s += v === true || v === "true" ? ` [${p.name}]` : ` [${p.name}=${str(v)}]`;
  }
  const focusable = node.properties?.some((p) => p.name === "focusable" && p.value.value === true);
  if ((ACTIONABLE.has(role) || focusable) && node.backendDOMNodeId !== undefined) s += ` [ref=${input.ref(node.backendDOMNodeId)}]`;
  return s;
}

/** A leaf with a value (a filled text box) shows it after a colon, as Playwright does. */
function inlineValue(out: string[], at: number, node: AXNode): void {
  const value = cut(str(node.value?.value));
  if (value) out[at] += `: ${quote(value)}`;
}

/**
 * What changed from one snapshot's lines to the next: the common head and
 * tail are cut away and the middle is shown as `- ` (gone) and `+ ` (new)
 * lines under an `@@` header. Linear in the size, which is what matters for a
 * page of thousands of lines where one thing changed.
 */
export function deltaLines(before: string[], after: string[]): string[] {
  let head = 0;
  while (head < before.length && head < after.length && before[head] === after[head]) head++;
  let tail = 0;
  while (tail < before.length - head && tail < after.length - head && before[before.length - 1 - tail] === after[after.length - 1 - tail])
    tail++;
  const gone = before.slice(head, before.length - tail);
  const added = after.slice(head, after.length - tail);
  if (gone.length === 0 && added.length === 0) return [];
  return [`@@ line ${head + 1}: ${gone.length} gone, ${added.length} new`, ...gone.map((l) => `- ${l}`), ...added.map((l) => `+ ${l}`)];
}

/** Lines from `start` that fit in `maxBytes` (at least one), and where the next part starts if any is left. */
export function page(lines: string[], start: number, maxBytes: number): { text: string; next?: number } {
  let bytes = 0;
  let end = start;
  while (end < lines.length) {
    const size = Buffer.byteLength(lines[end] ?? "") + 1;
    if (end > start && bytes + size > maxBytes) break;
    bytes += size;
    end++;
  }
  const text = lines.slice(start, end).join("\n");
  return end < lines.length ? { text, next: end } : { text };
}
