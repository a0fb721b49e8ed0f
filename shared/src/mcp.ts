// The tools `hutch mcp` serves, as TypeBox schemas (which are JSON Schema, so
// they are what tools/list sends). The browser and port tools take their
// fields from the guest tool schemas in ./protocol/tools.ts, so an MCP call
// and a guest call cannot disagree; `box` names the box, `tab` defaults to
// the box's last opened tab.
import { Type, type Static, type TObject, type TProperties } from "@sinclair/typebox";
import { BoxName, EngineName } from "./api.ts";
import {
  BrowserAct,
  BrowserOpen,
  BrowserScreenshot,
  BrowserSnapshot,
  BrowserWait,
  BrowserNavigate,
  DesktopInput,
  DesktopStart,
  ExecOpen,
  Ref,
  TabId,
} from "./protocol/tools.ts";

const Box = Type.String({ minLength: 1, maxLength: 128, description: "the box, by name or id (hutch box list)" });
const Tab = Type.Optional(Type.String({ ...TabId, description: "the tab (tab_N); default: the box's last opened tab" }));
const Path = Type.String({ minLength: 1, maxLength: 4096, description: "an absolute path in the box (/workspace/...)" });

/** The guest tool's fields but `tool` and `tab`, with `box` and an optional `tab` in front. */
function onBox<P extends TProperties>(schema: TObject<P>) {
  return Type.Composite([Type.Object({ box: Box, tab: Tab }), Type.Omit(schema, ["tool", "tab"])], { additionalProperties: false });
}

const actProps = BrowserAct.properties;
const refAct = <E extends TProperties>(extra: E) =>
  Type.Object(
    {
      box: Box,
      tab: Tab,
      ref: Ref,
      /** What Playwright's tools ask for "to obtain permission": shown in the session log, not used to find the element. */
      element: Type.Optional(Type.String({ maxLength: 256, description: "what the element is, in words (for the log)" })),
      ...extra,
    },
    { additionalProperties: false },
  );

export const McpTools = {
  box_list: { description: "List the boxes: name, id, engine, state.", input: Type.Object({}, { additionalProperties: false }) },
  box_create: {
    description: "Create a box (process engine unless named) and start it.",
    input: Type.Object({ name: BoxName, engine: Type.Optional(EngineName) }, { additionalProperties: false }),
  },
  box_start: { description: "Start a stopped box.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
  box_stop: { description: "Stop a running box.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
  exec: {
    description:
      "Run a command in a box (argv, no shell unless you run one) and return its exit code, stdout and stderr (each cut at 64 KiB).",
    input: Type.Object(
      {
        box: Box,
        argv: ExecOpen.properties.argv,
        cwd: ExecOpen.properties.cwd,
        timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 600_000, description: "kill it after this long (default 120000)" })),
      },
      { additionalProperties: false },
    ),
  },
  file_read: {
    description: "Read a text file in a box (at most 1 MiB).",
    input: Type.Object({ box: Box, path: Path }, { additionalProperties: false }),
  },
  file_write: {
    description: "Write a text file in a box atomically (replacing it).",
    input: Type.Object({ box: Box, path: Path, content: Type.String({ maxLength: 8 * 1024 * 1024 }) }, { additionalProperties: false }),
  },
  file_list: { description: "List a directory in a box.", input: Type.Object({ box: Box, path: Path }, { additionalProperties: false }) },
  port_list: { description: "The TCP ports listening in a box.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
  browser_open: { description: "Open a tab in the box's Chromium, at url if given; returns the tab.", input: onBox(BrowserOpen) },
  browser_tabs: { description: "List the box's open tabs.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
  browser_navigate: { description: "Load a URL in a tab.", input: onBox(BrowserNavigate) },
  browser_snapshot: {
    description:
      'The page as ref-tagged accessibility lines (- button "Save" [ref=e3]), nested by indentation, iframes included. Cut at maxBytes with a `more` cursor; delta: only what changed since the last snapshot.',
    input: onBox(BrowserSnapshot),
  },
  browser_click: { description: "Click an element by its ref from a snapshot.", input: refAct({}) },
  browser_hover: { description: "Move the pointer over an element by ref.", input: refAct({}) },
  browser_type: {
    description: "Replace a field's text by ref; submit presses Enter after.",
    input: refAct({ text: Type.String({ maxLength: 100_000 }), submit: actProps.submit }),
  },
  browser_select: {
    description: "Select options of a select element by value or label.",
    input: refAct({ values: Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 256 }) }),
  },
  browser_press: {
    description: "Press a key (Enter, Tab, Escape, ArrowDown, a, ...) in the focused element, or in ref's.",
    input: Type.Object(
      { box: Box, tab: Tab, key: Type.String({ minLength: 1, maxLength: 32 }), ref: Type.Optional(Ref) },
      { additionalProperties: false },
    ),
  },
  browser_wait: { description: "Wait until the page shows text, or ref is on screen.", input: onBox(BrowserWait) },
  browser_screenshot: { description: "A PNG of the tab's viewport, one element (ref) or the full page.", input: onBox(BrowserScreenshot) },
  browser_close: { description: "Close a tab.", input: Type.Object({ box: Box, tab: Tab }, { additionalProperties: false }) },
  browser_console: {
    description: "The tab's last console messages.",
    input: Type.Object({ box: Box, tab: Tab }, { additionalProperties: false }),
  },
  browser_network: {
    description: "The tab's last requests: method, url, status.",
    input: Type.Object({ box: Box, tab: Tab }, { additionalProperties: false }),
  },
  desktop_start: {
    description: "Start the box's X desktop (Xvfb, 1024x768 unless sized); programs started after it (exec) get its DISPLAY.",
    input: Type.Composite([Type.Object({ box: Box }), Type.Omit(DesktopStart, ["tool"])], { additionalProperties: false }),
  },
  desktop_screenshot: {
    description: "A PNG of the box's whole desktop.",
    input: Type.Object({ box: Box }, { additionalProperties: false }),
  },
  desktop_windows: {
    description: "The desktop's visible windows: id, name, geometry.",
    input: Type.Object({ box: Box }, { additionalProperties: false }),
  },
  desktop_input: {
    description:
      "Pointer and keys on the desktop: move/click (x, y, button), drag (x, y to toX, toY), key (X keysym names: Return, ctrl+c), type (text). One actor holds the input at a time; steal takes it.",
    input: Type.Composite([Type.Object({ box: Box }), Type.Omit(DesktopInput, ["tool", "owner"])], { additionalProperties: false }),
  },
  desktop_release: { description: "Give up the desktop's input.", input: Type.Object({ box: Box }, { additionalProperties: false }) },
} as const;

export type McpToolName = keyof typeof McpTools;
export type McpInput<N extends McpToolName> = Static<(typeof McpTools)[N]["input"]>;
