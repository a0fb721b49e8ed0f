// What each MCP tool does, given arguments already checked against its
// schema (shared/src/mcp.ts). Results are text an agent reads, or an image.
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { snapshotText, tabLine, type Box, type McpInput, type McpToolName } from "@hutch/shared";
import { BoxBrowser } from "../client/browser.ts";
import type { DaemonClient } from "../client/daemon.ts";
import { BoxDesktop } from "../client/desktop.ts";
import { listPorts } from "../client/ports.ts";
import { execCollect, listDir, readText, writeText } from "./box-io.ts";
import { count } from "@hutch/shared/text";

const EXEC_TIMEOUT_MS = 120_000;

function text(t: string): CallToolResult {
  return { content: [{ type: "text", text: t }] };
}

function json(v: unknown): CallToolResult {
  return text(JSON.stringify(v, null, 2));
}

type Handler<N extends McpToolName> = (d: DaemonClient, a: McpInput<N>) => Promise<CallToolResult>;
const browser = (d: DaemonClient, box: string) => new BoxBrowser(d, box);

const HANDLERS: { [N in McpToolName]: Handler<N> } = {
  box_list: async (d) => {
    const boxes = await d.request<Box[]>("GET", "/v1/boxes");
    return json(boxes.map((b) => ({ name: b.name, id: b.id, engine: b.engine, state: b.state })));
  },
  box_create: async (d, a) => {
    const b = await d.request<Box>(
      "POST",
      "/v1/boxes",
      { name: a.name, engine: a.engine ?? "process", start: true },
      { idempotencyKey: crypto.randomUUID() },
    );
    return text(`created ${b.name} (${b.id}), ${b.state}`);
  },
  box_start: async (d, a) => {
    await d.request("POST", `/v1/boxes/${encodeURIComponent(a.box)}/start`, undefined, { idempotencyKey: crypto.randomUUID() });
    return text(`started ${a.box}`);
  },
  box_stop: async (d, a) => {
    await d.request("POST", `/v1/boxes/${encodeURIComponent(a.box)}/stop`, undefined, { idempotencyKey: crypto.randomUUID() });
    return text(`stopped ${a.box}`);
  },
  exec: async (d, a) => {
    const r = await execCollect(d, a.box, { argv: a.argv, ...(a.cwd ? { cwd: a.cwd } : {}) }, a.timeoutMs ?? EXEC_TIMEOUT_MS);
    const status = r.timedOut ? "killed after the timeout" : r.exit?.signal ? `killed by ${r.exit.signal}` : `exit ${r.exit?.code ?? "?"}`;
    const parts = [
      status,
      r.stdout && `stdout:\n${r.stdout}`,
      r.stderr && `stderr:\n${r.stderr}`,
      r.cut && "(output cut at 64 KiB a stream)",
    ];
    return { content: [{ type: "text", text: parts.filter(Boolean).join("\n") }], ...(r.exit?.code === 0 ? {} : { isError: true }) };
  },
  file_read: async (d, a) => text(await readText(d, a.box, a.path)),
  file_write: async (d, a) => text(`wrote ${count(await writeText(d, a.box, a.path, a.content), "byte")} to ${a.path}`),
  file_list: async (d, a) => text(await listDir(d, a.box, a.path)),
  port_list: async (d, a) => json(await listPorts(d, a.box)),
  browser_open: async (d, a) => text(tabLine(await browser(d, a.box).open(a.url))),
  browser_tabs: async (d, a) => text((await browser(d, a.box).tabs()).map(tabLine).join("\n") || "no tabs"),
  browser_navigate: async (d, a) => text(tabLine(await browser(d, a.box).navigate(a.url, a.tab))),
  browser_snapshot: async (d, a) => {
    return text(snapshotText(await browser(d, a.box).snapshot({ tab: a.tab, delta: a.delta, maxBytes: a.maxBytes, more: a.more })));
  },
  browser_click: async (d, a) => text(tabLine(await browser(d, a.box).act({ action: "click", ref: a.ref }, a.tab))),
  browser_hover: async (d, a) => text(tabLine(await browser(d, a.box).act({ action: "hover", ref: a.ref }, a.tab))),
  browser_type: async (d, a) =>
    text(tabLine(await browser(d, a.box).act({ action: "type", ref: a.ref, text: a.text, submit: a.submit }, a.tab))),
  browser_select: async (d, a) => text(tabLine(await browser(d, a.box).act({ action: "select", ref: a.ref, values: a.values }, a.tab))),
  browser_press: async (d, a) => text(tabLine(await browser(d, a.box).act({ action: "press", key: a.key, ref: a.ref }, a.tab))),
  browser_wait: async (d, a) => {
    const r = await browser(d, a.box).wait({ text: a.text, ref: a.ref, timeoutMs: a.timeoutMs }, a.tab);
    return text(`appeared after ${r.waitedMs} ms`);
  },
  browser_screenshot: async (d, a) => {
    const { info, png } = await browser(d, a.box).screenshot({ ref: a.ref, fullPage: a.fullPage }, a.tab);
    return {
      content: [
        { type: "image", data: Buffer.from(png).toString("base64"), mimeType: "image/png" },
        { type: "text", text: `${info.width}x${info.height} PNG, ${info.size} bytes` },
      ],
    };
  },
  browser_close: async (d, a) => text(`closed ${tabLine(await browser(d, a.box).close(a.tab))}`),
  browser_console: async (d, a) =>
    text((await browser(d, a.box).console(a.tab)).map((l) => `${l.level}: ${l.text}`).join("\n") || "no console messages"),
  browser_network: async (d, a) =>
    text(
      (await browser(d, a.box).network(a.tab)).map((r) => `${r.method} ${r.failed ?? r.status ?? "pending"} ${r.url}`).join("\n") ||
        "no requests",
    ),
  desktop_start: async (d, a) => {
    const i = await new BoxDesktop(d, a.box).start({ width: a.width, height: a.height });
    return text(`DISPLAY=${i.display} ${i.width}x${i.height}`);
  },
  desktop_screenshot: async (d, a) => {
    const { info, png } = await new BoxDesktop(d, a.box).screenshot();
    return {
      content: [
        { type: "image", data: Buffer.from(png).toString("base64"), mimeType: "image/png" },
        { type: "text", text: `${info.width}x${info.height} PNG, ${info.size} bytes` },
      ],
    };
  },
  desktop_windows: async (d, a) => json(await new BoxDesktop(d, a.box).windows()),
  desktop_input: async (d, a) => {
    const { box, ...args } = a;
    const r = await new BoxDesktop(d, box).input(args);
    return text(r.stolenFrom ? `done; took the input from ${r.stolenFrom}` : "done");
  },
  desktop_release: async (d, a) => {
    await new BoxDesktop(d, a.box).release();
    return text("released");
  },
};

export function callTool(d: DaemonClient, name: McpToolName, args: unknown): Promise<CallToolResult> {
  return (HANDLERS[name] as Handler<McpToolName>)(d, args as McpInput<McpToolName>);
}
