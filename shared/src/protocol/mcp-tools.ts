// The browser and desktop tools as MCP serves them: each one's name,
// description and input schema, defined once. An agent inside a box gets
// exactly these (from hutch-guest's MCP server, guest/src/mcp/); `hutch mcp`
// on the host serves the same ones with a `box` field in front
// (../mcp.ts). Fields come from the guest tool schemas (./tools.ts), so an
// MCP call and a guest call cannot disagree. This file is part of the wire
// entry: it reaches nothing but TypeBox and ./tools.ts.
import { Type, type Static, type TObject, type TProperties } from "@sinclair/typebox";
import {
  BrowserAct,
  BrowserOpen,
  BrowserScreenshot,
  BrowserSnapshot,
  BrowserWait,
  BrowserNavigate,
  DesktopInput,
  DesktopStart,
  Ref,
  TabId,
  type BrowserSnapshotResult,
  type TabInfo,
} from "./tools.ts";

const Tab = Type.Optional(Type.String({ ...TabId, description: "the tab (tab_N); default: the box's last opened tab" }));

/** The guest tool's fields but `tool` and `tab`, with an optional `tab`. */
function onTab<P extends TProperties>(schema: TObject<P>) {
  return Type.Composite([Type.Object({ tab: Tab }), Type.Omit(schema, ["tool", "tab"])], { additionalProperties: false });
}

const actProps = BrowserAct.properties;
const refAct = <E extends TProperties>(extra: E) =>
  Type.Object(
    {
      tab: Tab,
      ref: Ref,
      /** What Playwright's tools ask for "to obtain permission": shown in the session log, not used to find the element. */
      element: Type.Optional(Type.String({ maxLength: 256, description: "what the element is, in words (for the log)" })),
      ...extra,
    },
    { additionalProperties: false },
  );
const tabOnly = () => Type.Object({ tab: Tab }, { additionalProperties: false });
const nothing = () => Type.Object({}, { additionalProperties: false });

export const BoxMcpTools = {
  browser_open: { description: "Open a tab in the box's Chromium, at url if given; returns the tab.", input: onTab(BrowserOpen) },
  browser_tabs: { description: "List the box's open tabs.", input: nothing() },
  browser_navigate: { description: "Load a URL in a tab.", input: onTab(BrowserNavigate) },
  browser_snapshot: {
    description:
      'The page as ref-tagged accessibility lines (- button "Save" [ref=e3]), nested by indentation, iframes included. Cut at maxBytes with a `more` cursor; delta: only what changed since the last snapshot.',
    input: onTab(BrowserSnapshot),
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
      { tab: Tab, key: Type.String({ minLength: 1, maxLength: 32 }), ref: Type.Optional(Ref) },
      { additionalProperties: false },
    ),
  },
  browser_wait: { description: "Wait until the page shows text, or ref is on screen.", input: onTab(BrowserWait) },
  browser_screenshot: { description: "A PNG of the tab's viewport, one element (ref) or the full page.", input: onTab(BrowserScreenshot) },
  browser_close: { description: "Close a tab.", input: tabOnly() },
  browser_console: { description: "The tab's last console messages.", input: tabOnly() },
  browser_network: { description: "The tab's last requests: method, url, status.", input: tabOnly() },
  desktop_start: {
    description: "Start the box's X desktop (Xvfb, 1024x768 unless sized); programs started after it (exec) get its DISPLAY.",
    input: Type.Omit(DesktopStart, ["tool"], { additionalProperties: false }),
  },
  desktop_screenshot: { description: "A PNG of the box's whole desktop.", input: nothing() },
  desktop_windows: { description: "The desktop's visible windows: id, name, geometry.", input: nothing() },
  desktop_input: {
    description:
      "Pointer and keys on the desktop: move/click (x, y, button), drag (x, y to toX, toY), key (X keysym names: Return, ctrl+c), type (text). One actor holds the input at a time; steal takes it.",
    input: Type.Omit(DesktopInput, ["tool", "owner"], { additionalProperties: false }),
  },
  desktop_release: { description: "Give up the desktop's input.", input: nothing() },
} as const;

export type BoxMcpToolName = keyof typeof BoxMcpTools;
export type BoxMcpInput<N extends BoxMcpToolName> = Static<(typeof BoxMcpTools)[N]["input"]>;

// What the tools answer, as text an agent reads: the same words from the
// host's server and the guest's.

export const tabLine = (t: TabInfo) => `${t.tab} ${t.url} ${JSON.stringify(t.title)}`;

export function snapshotText(s: BrowserSnapshotResult): string {
  const head = `${s.tab} ${s.url} ${JSON.stringify(s.title)}${s.delta ? " (changes since the last snapshot)" : ""}`;
  const tail = s.more ? `\n(cut: ${s.bytes} bytes in all; call browser_snapshot with more: "${s.more}" for the rest)` : "";
  return `${head}\n${s.text}${tail}`;
}

/** The MCP protocol revisions a server here speaks, newest first. */
export const MCP_PROTOCOL_VERSIONS = ["2025-06-18", "2025-03-26", "2024-11-05"] as const;

/** Longest string an MCP call's logged arguments keep. */
const LOGGED_STRING_MAX = 1000;

/**
 * A call's arguments as a session log keeps them, for `hutch mcp` on the host
 * and the box's own MCP server alike: every long string cut (file contents
 * must not fill the log), at most 100 members or items a level, 8 levels.
 */
export function loggedInput(value: unknown, depth = 0): unknown {
  if (typeof value === "string")
    return value.length > LOGGED_STRING_MAX ? `${value.slice(0, LOGGED_STRING_MAX)}… (${value.length} chars)` : value;
  if (depth > 8 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.slice(0, 100).map((v) => loggedInput(v, depth + 1));
  return Object.fromEntries(
    Object.entries(value)
      .slice(0, 100)
      .map(([k, v]) => [k, loggedInput(v, depth + 1)]),
  );
}
