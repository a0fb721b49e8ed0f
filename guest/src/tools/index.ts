// Dispatch of OPEN payloads to the tool handlers. The payload is untrusted:
// it is checked against the tool's own schema first, so the error names the
// field that is wrong rather than "no union member matched".
import { Value } from "@sinclair/typebox/value";
import type { TSchema } from "@sinclair/typebox";
import {
  BrowserAct,
  BrowserClose,
  BrowserConsole,
  BrowserNavigate,
  BrowserNetwork,
  BrowserOpen,
  BrowserScreenshot,
  BrowserSnapshot,
  BrowserTabs,
  BrowserWait,
  DesktopInput,
  DesktopRelease,
  DesktopScreenshot,
  DesktopStart,
  DesktopWindows,
  ExecOpen,
  FsList,
  FsRead,
  FsStat,
  FsWrite,
  McpServe,
  NetAccept,
  NetListen,
  PortConnect,
  PortList,
  PtyAttach,
  PtyKill,
  PtyList,
  PtyOpen,
  SnapOut,
  TarIn,
  TarOut,
  type MuxStream,
  type ToolOpen,
} from "@hutch/shared/wire";
import { guard, type ToolContext } from "./context.ts";
import { runExec } from "./exec.ts";
import { fsList, fsRead, fsStat, fsWrite } from "./fs.ts";
import { holdFrames } from "./inbox.ts";
import { snapOut } from "./snap.ts";
import { tarIn, tarOut } from "./tar.ts";
import { portConnect, portList } from "./ports.ts";

/** Listeners that are the guest's own, not the user's to forward. */
function guestPorts(ctx: ToolContext): Set<number> {
  const own = new Set(ctx.net.ports());
  if (ctx.browser.devtoolsPort) own.add(ctx.browser.devtoolsPort);
  for (const p of ctx.mcp.ports()) own.add(p);
  return own;
}

const SCHEMAS: Record<ToolOpen["tool"], TSchema> = {
  exec: ExecOpen,
  "pty.open": PtyOpen,
  "pty.attach": PtyAttach,
  "pty.list": PtyList,
  "pty.kill": PtyKill,
  "fs.stat": FsStat,
  "fs.list": FsList,
  "fs.read": FsRead,
  "fs.write": FsWrite,
  "tar.out": TarOut,
  "tar.in": TarIn,
  "snap.out": SnapOut,
  "net.listen": NetListen,
  "net.accept": NetAccept,
  "port.list": PortList,
  "port.connect": PortConnect,
  "browser.open": BrowserOpen,
  "browser.tabs": BrowserTabs,
  "browser.navigate": BrowserNavigate,
  "browser.close": BrowserClose,
  "browser.snapshot": BrowserSnapshot,
  "browser.act": BrowserAct,
  "browser.wait": BrowserWait,
  "browser.screenshot": BrowserScreenshot,
  "browser.console": BrowserConsole,
  "browser.network": BrowserNetwork,
  "desktop.start": DesktopStart,
  "desktop.screenshot": DesktopScreenshot,
  "desktop.windows": DesktopWindows,
  "desktop.input": DesktopInput,
  "desktop.release": DesktopRelease,
  "mcp.serve": McpServe,
};

/** Why a payload is not a valid tool call, or undefined if it is one. */
export function checkOpen(payload: unknown): { code: "invalid" | "unsupported"; message: string } | undefined {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    return { code: "invalid", message: "open payload: Expected object" };
  }
  const tool = (payload as { tool?: unknown }).tool;
  if (typeof tool !== "string") return { code: "invalid", message: "tool: Expected string" };
  if (!Object.hasOwn(SCHEMAS, tool)) return { code: "unsupported", message: `unknown tool ${JSON.stringify(tool)}` };
  const schema = SCHEMAS[tool as ToolOpen["tool"]];
  const first = Value.Errors(schema, payload).First();
  if (!first) return undefined;
  // "/env/FOO" → "env.FOO"; an error on the object itself names the tool.
  const field = first.path.slice(1).replaceAll("/", ".") || tool;
  return { code: "invalid", message: `${field}: ${first.message}` };
}

export function handleOpen(stream: MuxStream, payload: unknown, ctx: ToolContext): void {
  const problem = checkOpen(payload);
  if (problem) return stream.close(problem);
  const req = payload as ToolOpen;
  holdFrames(stream);
  ctx.log.debug("open", { stream: stream.id, tool: req.tool });
  switch (req.tool) {
    case "exec":
      return guard(stream, ctx, req.tool, () => runExec(stream, req, ctx));
    case "pty.open":
      return guard(stream, ctx, req.tool, () => ctx.ptys.open(stream, req));
    case "pty.attach":
      return ctx.ptys.attach(stream, req);
    case "pty.list":
      stream.msg({ type: "result", value: ctx.ptys.list() });
      return stream.close();
    case "pty.kill":
      return ctx.ptys.kill(stream, req);
    case "fs.stat":
      return guard(stream, ctx, req.tool, () => fsStat(stream, req, ctx));
    case "fs.list":
      return guard(stream, ctx, req.tool, () => fsList(stream, req, ctx));
    case "fs.read":
      return guard(stream, ctx, req.tool, () => fsRead(stream, req, ctx));
    case "fs.write":
      return guard(stream, ctx, req.tool, () => fsWrite(stream, req, ctx));
    case "tar.out":
      return guard(stream, ctx, req.tool, () => tarOut(stream, req, ctx));
    case "tar.in":
      return guard(stream, ctx, req.tool, () => tarIn(stream, req, ctx));
    case "snap.out":
      return guard(stream, ctx, req.tool, () => snapOut(stream, req, ctx));
    case "net.listen":
      return ctx.net.listen(stream, req);
    case "net.accept":
      return ctx.net.accept(stream, req);
    case "port.list":
      return guard(stream, ctx, req.tool, () => portList(stream, guestPorts(ctx)));
    case "port.connect":
      return portConnect(stream, req, guestPorts(ctx));
    case "browser.open":
      return guard(stream, ctx, req.tool, () => ctx.browser.open(stream, req));
    case "browser.tabs":
      return guard(stream, ctx, req.tool, () => ctx.browser.list(stream));
    case "browser.navigate":
      return guard(stream, ctx, req.tool, () => ctx.browser.navigate(stream, req));
    case "browser.close":
      return guard(stream, ctx, req.tool, () => ctx.browser.close(stream, req));
    case "browser.snapshot":
      return guard(stream, ctx, req.tool, () => ctx.browser.snapshot(stream, req));
    case "browser.act":
      return guard(stream, ctx, req.tool, () => ctx.browser.act(stream, req));
    case "browser.wait":
      return guard(stream, ctx, req.tool, () => ctx.browser.wait(stream, req));
    case "browser.screenshot":
      return guard(stream, ctx, req.tool, () => ctx.browser.screenshot(stream, req));
    case "browser.console":
      return guard(stream, ctx, req.tool, async () => ctx.browser.console(stream, req));
    case "browser.network":
      return guard(stream, ctx, req.tool, async () => ctx.browser.network(stream, req));
    case "desktop.start":
      return guard(stream, ctx, req.tool, () => ctx.desktop.start(stream, req));
    case "desktop.screenshot":
      return guard(stream, ctx, req.tool, () => ctx.desktop.screenshot(stream));
    case "desktop.windows":
      return guard(stream, ctx, req.tool, () => ctx.desktop.windows(stream));
    case "desktop.input":
      return guard(stream, ctx, req.tool, () => ctx.desktop.input(stream, req));
    case "desktop.release":
      return guard(stream, ctx, req.tool, async () => ctx.desktop.release(stream, req));
    case "mcp.serve":
      return ctx.mcp.serve(stream, req);
  }
}
