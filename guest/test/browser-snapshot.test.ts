// The snapshot format as data: CDP accessibility nodes in, Playwright-style lines out.
import { describe, expect, test } from "bun:test";
import { deltaLines, page, snapshotLines, type AXNode } from "../src/tools/browser/snapshot.ts";

let seq = 0;
function node(role: string, name = "", kids: AXNode[] = [], extra: Partial<AXNode> = {}): AXNode[] {
  const id = String(++seq);
  const me: AXNode = { nodeId: id, ignored: false, role: { value: role }, name: { value: name }, backendDOMNodeId: 100 + seq, ...extra };
  me.childIds = kids.filter((k) => !kids.some((o) => o.childIds?.includes(k.nodeId))).map((k) => k.nodeId);
  return [me, ...kids];
}
function tree(...kids: AXNode[][]): AXNode[] {
  const flat = kids.flat();
  const root: AXNode = {
    nodeId: "root",
    ignored: false,
    role: { value: "RootWebArea" },
    name: { value: "Title" },
    childIds: kids.map((k) => k[0]?.nodeId ?? ""),
  };
  return [root, ...flat];
}
function render(nodes: AXNode[], frames = new Map<number, AXNode[]>()): string {
  const refs = new Map<number, string>();
  const ref = (b: number): string => {
    if (!refs.has(b)) refs.set(b, `e${refs.size + 1}`);
    return refs.get(b) ?? "";
  };
  return snapshotLines({ nodes, frames, ref }).join("\n");
}

describe("snapshotLines", () => {
  const cases: [string, AXNode[], string][] = [
    [
      "a heading with its level, no ref",
      tree(node("heading", "Hi", node("StaticText", "Hi"), { properties: [{ name: "level", value: { value: 1 } }] })),
      '- heading "Hi" [level=1]',
    ],
    [
      "a button gets a ref, its repeated text is dropped",
      tree(node("button", "Save", node("StaticText", "Save"))),
      '- button "Save" [ref=e1]',
    ],
    ["unnamed generics are lifted", tree(node("generic", "", node("generic", "", node("link", "Home")))), '- link "Home" [ref=e1]'],
    [
      "ignored nodes are lifted",
      tree(node("none", "", node("paragraph", "", node("StaticText", "hello")), { ignored: true })),
      '- paragraph:\n  - text: "hello"',
    ],
    [
      "a text box shows its value, not its text",
      tree(node("textbox", "Name", node("StaticText", "Ada"), { value: { value: "Ada" } })),
      '- textbox "Name" [ref=e1]: "Ada"',
    ],
    [
      "states are shown, false ones not",
      tree(
        node("checkbox", "Agree", [], {
          properties: [
            { name: "checked", value: { value: "true" } },
            { name: "disabled", value: { value: false } },
          ],
        }),
      ),
      '- checkbox "Agree" [checked] [ref=e1]',
    ],
    [
      "a focusable element of any role gets a ref",
      tree(node("listitem", "row", [], { properties: [{ name: "focusable", value: { value: true } }] })),
      '- listitem "row" [ref=e1]',
    ],
    ["a huge name is cut", tree(node("button", "x".repeat(1000))), `- button "${"x".repeat(300)}…" [ref=e1]`],
    [
      "inline text boxes and line breaks are skipped",
      tree(node("paragraph", "", [...node("StaticText", "a", node("InlineTextBox", "a")), ...node("LineBreak", "\n")])),
      '- paragraph:\n  - text: "a"',
    ],
  ];
  for (const [what, nodes, want] of cases) test(what, () => expect(render(nodes)).toBe(want));

  test("an iframe's document nests under it", () => {
    const frame = tree(node("button", "Inner"));
    const outer = tree(node("Iframe", "Frame", [], { backendDOMNodeId: 7 }));
    expect(render(outer, new Map([[7, frame]]))).toBe('- iframe "Frame" [ref=e1]:\n  - button "Inner" [ref=e2]');
  });

  test("a frame that contains itself stops at the depth cap", () => {
    const loop = tree(node("Iframe", "Loop", [], { backendDOMNodeId: 9 }));
    const lines = render(loop, new Map([[9, loop]])).split("\n");
    expect(lines.length).toBeLessThan(12);
  });
});

describe("deltaLines", () => {
  test("one changed line in the middle of many", () => {
    const before = Array.from({ length: 1000 }, (_, i) => `- text: "${i}"`);
    const after = [...before];
    after[500] = '- text: "changed"';
    expect(deltaLines(before, after)).toEqual(["@@ line 501: 1 gone, 1 new", '- - text: "500"', '+ - text: "changed"']);
  });
  test("no change is empty", () => expect(deltaLines(["a", "b"], ["a", "b"])).toEqual([]));
  test("appended lines", () => expect(deltaLines(["a"], ["a", "b"])).toEqual(["@@ line 2: 0 gone, 1 new", "+ b"]));
});

describe("page", () => {
  test("cuts at a line boundary within the cap, and goes on from there", () => {
    const lines = ["aaaa", "bbbb", "cccc"];
    expect(page(lines, 0, 10)).toEqual({ text: "aaaa\nbbbb", next: 2 });
    expect(page(lines, 2, 10)).toEqual({ text: "cccc" });
  });
  test("a line longer than the cap still comes, alone", () =>
    expect(page(["x".repeat(50), "y"], 0, 10)).toEqual({ text: "x".repeat(50), next: 1 }));
});
