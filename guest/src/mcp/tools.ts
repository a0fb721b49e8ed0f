// What each in-box MCP tool does, given arguments already checked against
// its schema (shared/src/protocol/mcp-tools.ts): the guest's own browser and
// desktop handlers, called through a capture, their answers put into the
// words the host's `hutch mcp` uses. A call that names no tab acts on the
// last one opened.
import { snapshotText, tabLine, type BoxMcpInput, type BoxMcpToolName, type BrowserSnapshotWire, type TabInfo } from "@hutch/shared/wire";
import type { BrowserTable } from "../tools/browser/index.ts";
import { ToolError } from "../tools/base.ts";
import type { DesktopTable } from "../tools/desktop/index.ts";
import { capture } from "./capture.ts";

export type Content = { type: "text"; text: string } | { type: "image"; data: string; mimeType: string };
export interface CallToolResult {
  content: Content[];
  isError?: boolean;
}

export interface McpTables {
  browser: BrowserTable;
  desktop: DesktopTable;
  /** Who this server's desktop input is held by. */
  owner: string;
}

/** Snapshots at the guest's own cap; screenshots as the host's `hutch mcp` bounds them. */
const TEXT_MAX = 2 * 1024 * 1024;
const PNG_MAX = 64 * 1024 * 1024;

const text = (t: string): CallToolResult => ({ content: [{ type: "text", text: t }] });

function tabOf(t: McpTables, tab: string | undefined): string {
  const id = tab ?? t.browser.lastTab();
  if (!id) throw new ToolError("not_found", "no tab is open; open one: browser_open");
  return id;
}

async function tabInfo(run: Parameters<typeof capture>[0]): Promise<CallToolResult> {
  return text(tabLine((await capture(run, TEXT_MAX)).value as TabInfo));
}

function image(png: Uint8Array, info: { width: number; height: number; size: number }): CallToolResult {
  return {
    content: [
      { type: "image", data: Buffer.from(png).toString("base64"), mimeType: "image/png" },
      { type: "text", text: `${info.width}x${info.height} PNG, ${info.size} bytes` },
    ],
  };
}

type Handler<N extends BoxMcpToolName> = (t: McpTables, a: BoxMcpInput<N>) => Promise<CallToolResult>;

const act = (t: McpTables, tab: string | undefined, fields: Record<string, unknown>) =>
  tabInfo((r) => t.browser.act(r, { tool: "browser.act", tab: tabOf(t, tab), ...fields } as Parameters<BrowserTable["act"]>[1]));

const HANDLERS: { [N in BoxMcpToolName]: Handler<N> } = {
  browser_open: (t, a) => tabInfo((r) => t.browser.open(r, { tool: "browser.open", url: a.url, timeoutMs: a.timeoutMs })),
  browser_tabs: async (t) => {
    const tabs = (await capture((r) => t.browser.list(r), TEXT_MAX)).value as TabInfo[];
    return text(tabs.map(tabLine).join("\n") || "no tabs");
  },
  browser_navigate: (t, a) =>
    tabInfo((r) => t.browser.navigate(r, { tool: "browser.navigate", tab: tabOf(t, a.tab), url: a.url, timeoutMs: a.timeoutMs })),
  browser_snapshot: async (t, a) => {
    const c = await capture(
      (r) => t.browser.snapshot(r, { tool: "browser.snapshot", tab: tabOf(t, a.tab), maxBytes: a.maxBytes, delta: a.delta, more: a.more }),
      TEXT_MAX,
    );
    const { size: _size, ...wire } = c.value as BrowserSnapshotWire;
    return text(snapshotText({ ...wire, text: new TextDecoder().decode(c.bytes) }));
  },
  browser_click: (t, a) => act(t, a.tab, { action: "click", ref: a.ref }),
  browser_hover: (t, a) => act(t, a.tab, { action: "hover", ref: a.ref }),
  browser_type: (t, a) => act(t, a.tab, { action: "type", ref: a.ref, text: a.text, submit: a.submit }),
  browser_select: (t, a) => act(t, a.tab, { action: "select", ref: a.ref, values: a.values }),
  browser_press: (t, a) => act(t, a.tab, { action: "press", key: a.key, ref: a.ref }),
  browser_wait: async (t, a) => {
    const c = await capture(
      (r) => t.browser.wait(r, { tool: "browser.wait", tab: tabOf(t, a.tab), text: a.text, ref: a.ref, timeoutMs: a.timeoutMs }),
      TEXT_MAX,
    );
    return text(`appeared after ${(c.value as { waitedMs: number }).waitedMs} ms`);
  },
  browser_screenshot: async (t, a) => {
    const c = await capture(
      (r) => t.browser.screenshot(r, { tool: "browser.screenshot", tab: tabOf(t, a.tab), ref: a.ref, fullPage: a.fullPage }),
      PNG_MAX,
    );
    return image(c.bytes, c.value as { width: number; height: number; size: number });
  },
  browser_close: async (t, a) => {
    const c = await capture((r) => t.browser.close(r, { tool: "browser.close", tab: tabOf(t, a.tab) }), TEXT_MAX);
    return text(`closed ${tabLine(c.value as TabInfo)}`);
  },
  browser_console: async (t, a) => {
    const c = await capture((r) => t.browser.console(r, { tool: "browser.console", tab: tabOf(t, a.tab) }), TEXT_MAX);
    return text((c.value as { level: string; text: string }[]).map((l) => `${l.level}: ${l.text}`).join("\n") || "no console messages");
  },
  browser_network: async (t, a) => {
    const c = await capture((r) => t.browser.network(r, { tool: "browser.network", tab: tabOf(t, a.tab) }), TEXT_MAX);
    const rows = c.value as { method: string; url: string; status?: number; failed?: string }[];
    return text(rows.map((n) => `${n.method} ${n.failed ?? n.status ?? "pending"} ${n.url}`).join("\n") || "no requests");
  },
  desktop_start: async (t, a) => {
    const c = await capture((r) => t.desktop.start(r, { tool: "desktop.start", width: a.width, height: a.height }), TEXT_MAX);
    const i = c.value as { display: string; width: number; height: number };
    return text(`DISPLAY=${i.display} ${i.width}x${i.height}`);
  },
  desktop_screenshot: async (t) => {
    const c = await capture((r) => t.desktop.screenshot(r), PNG_MAX);
    return image(c.bytes, c.value as { width: number; height: number; size: number });
  },
  desktop_windows: async (t) => text(JSON.stringify((await capture((r) => t.desktop.windows(r), TEXT_MAX)).value, null, 2)),
  desktop_input: async (t, a) => {
    const c = await capture((r) => t.desktop.input(r, { tool: "desktop.input", ...a, owner: t.owner }), TEXT_MAX);
    const stolen = (c.value as { stolenFrom?: string }).stolenFrom;
    return text(stolen ? `done; took the input from ${stolen}` : "done");
  },
  desktop_release: async (t) => {
    await capture((r) => t.desktop.release(r, { tool: "desktop.release", owner: t.owner }), TEXT_MAX);
    return text("released");
  },
};

export function callBoxTool(t: McpTables, name: BoxMcpToolName, args: unknown): Promise<CallToolResult> {
  return (HANDLERS[name] as Handler<BoxMcpToolName>)(t, args as BoxMcpInput<BoxMcpToolName>);
}
