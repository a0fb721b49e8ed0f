// The tools the guest serves: what an OPEN frame carries, and the messages a
// stream exchanges. Validated on both ends; the host treats every guest
// message as untrusted and checks it against these before use.
import { Type, type Static, type TProperties } from "@sinclair/typebox";
import { idPattern } from "../ids.ts";

const Env = Type.Record(Type.String({ pattern: "^[^=\\0]+$", rule: "a variable name, without '='" }), Type.String());
const Argv = Type.Array(Type.String(), { minItems: 1, maxItems: 4096 });
const GuestPath = Type.String({ minLength: 1, maxLength: 4096 });
const Cols = Type.Integer({ minimum: 1, maximum: 1000 });
const Rows = Type.Integer({ minimum: 1, maximum: 1000 });
/** Who a process runs as: the box's user (uid 1000, the default) or root (VM boxes only: a process box has no root). */
export const BoxUser = Type.Union([Type.Literal("hutch"), Type.Literal("root")]);
export type BoxUser = Static<typeof BoxUser>;
/** A terminal's id: `pty_` and any run of id characters, so a mistyped one is "no such terminal" (exit 4), not a schema error. */
const PtyId = Type.String({ pattern: "^pty_[0-9a-z]+$", title: "terminal", rule: "a terminal id: pty_ and lowercase letters or digits" });

export const ExecOpen = Type.Object(
  {
    tool: Type.Literal("exec"),
    argv: Argv,
    env: Type.Optional(Env),
    cwd: Type.Optional(GuestPath),
    user: Type.Optional(BoxUser),
  },
  { additionalProperties: false },
);

export const PtyOpen = Type.Object(
  {
    tool: Type.Literal("pty.open"),
    argv: Argv,
    env: Type.Optional(Env),
    cwd: Type.Optional(GuestPath),
    user: Type.Optional(BoxUser),
    cols: Cols,
    rows: Rows,
  },
  { additionalProperties: false },
);

export const PtyAttach = Type.Object(
  { tool: Type.Literal("pty.attach"), id: PtyId, cols: Type.Optional(Cols), rows: Type.Optional(Rows) },
  { additionalProperties: false },
);
export const PtyList = Type.Object({ tool: Type.Literal("pty.list") }, { additionalProperties: false });
export const PtyKill = Type.Object(
  { tool: Type.Literal("pty.kill"), id: PtyId, signal: Type.Optional(Type.String()) },
  { additionalProperties: false },
);

const PathOnly = <T extends string>(tool: T) => Type.Object({ tool: Type.Literal(tool), path: GuestPath }, { additionalProperties: false });
export const FsStat = PathOnly("fs.stat");
export const FsList = PathOnly("fs.list");
export const FsRead = PathOnly("fs.read");
export const FsWrite = Type.Object(
  { tool: Type.Literal("fs.write"), path: GuestPath, mode: Type.Optional(Type.Integer({ minimum: 0, maximum: 0o7777 })) },
  { additionalProperties: false },
);
export const TarOut = Type.Object(
  {
    tool: Type.Literal("tar.out"),
    path: GuestPath,
    /** Leave out what these rules exclude (shared/src/ignore.ts syntax, relative to path). */
    exclude: Type.Optional(Type.Array(Type.String({ maxLength: 256 }), { maxItems: 1000 })),
    /** Snapshot metadata: exact mtimes and owners in pax records, hard links as link entries. */
    meta: Type.Optional(Type.Boolean()),
    /** Also honour rule files of this name found in the tree (".hutchignore"). */
    ignoreFile: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: "^[^/\\0]+$", rule: "a file name, without '/'" })),
  },
  { additionalProperties: false },
);
/**
 * snap.out: walk a root and send it as chunk records (shared/src/chunk/records.ts)
 * on chan 1. Before the walk the host sends `offered` digests (32 bytes each) on
 * chan 0 and eof: chunks this box's own snapshots hold, which the guest names
 * instead of sending. Capability `chunks`.
 */
export const SnapOut = Type.Object(
  {
    tool: Type.Literal("snap.out"),
    path: GuestPath,
    exclude: Type.Optional(Type.Array(Type.String({ maxLength: 256 }), { maxItems: 1000 })),
    ignoreFile: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: "^[^/\\0]+$", rule: "a file name, without '/'" })),
    /** The store's chunk sizes and gear table (256 little-endian u32 words, base64) for this save. */
    chunk: Type.Object(
      { minSize: Type.Integer({ minimum: 1 }), avgSize: Type.Integer({ minimum: 1 }), maxSize: Type.Integer({ minimum: 1 }) },
      { additionalProperties: false },
    ),
    gear: Type.String({ minLength: 1368, maxLength: 1368 }),
    /** The box's digest key (32 bytes, base64): a chunk's digest is HMAC-SHA-256(key, bytes). */
    digestKey: Type.String({ minLength: 44, maxLength: 44 }),
    offered: Type.Integer({ minimum: 0, maximum: 250_000 }),
  },
  { additionalProperties: false },
);
/** snap.out's result: what the walk sent (record bytes in all), and the chunks sent and named. */
export const SnapOutResult = Type.Object({
  entries: Type.Integer({ minimum: 0 }),
  bytesSent: Type.Integer({ minimum: 0 }),
  chunksSent: Type.Integer({ minimum: 0 }),
  chunksNamed: Type.Integer({ minimum: 0 }),
});
export type SnapOutResult = Static<typeof SnapOutResult>;
export const TarIn = Type.Object(
  {
    tool: Type.Literal("tar.in"),
    path: GuestPath,
    /** Rename the archive's top entry to this (how `cp SRC BOX:/new-name` works). */
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: "^[^/\\0]+$", rule: "a file name, without '/'" })),
    /** Take hard link entries (to files the same archive wrote) and exact pax mtimes: a snapshot restored into the box. */
    links: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

/**
 * The guest listens on its own loopback and announces each connection with a
 * ConnMsg; the host takes one with net.accept. Streams stay host-opened, and
 * each connection gets its own credit. How boxes reach the broker.
 */
export const NetListen = Type.Object(
  {
    tool: Type.Literal("net.listen"),
    port: Type.Integer({ minimum: 1, maximum: 65535 }),
    /** Variables every process started while the listener is up gets (how its clients find it). */
    env: Type.Optional(
      Type.Record(
        Type.String({ pattern: "^[A-Za-z_][A-Za-z0-9_]{0,127}$", rule: "an environment variable name: letters, digits and '_'" }),
        Type.String({ maxLength: 4096 }),
        { maxProperties: 128 },
      ),
    ),
  },
  { additionalProperties: false },
);
export const NetAccept = Type.Object(
  { tool: Type.Literal("net.accept"), conn: Type.Integer({ minimum: 1 }) },
  { additionalProperties: false },
);

/** port.list: the box's listening TCP sockets (what a dev server opened), without the guest's own. */
export const PortList = Type.Object({ tool: Type.Literal("port.list") }, { additionalProperties: false });
/** port.connect: a connection to a port on the box's loopback; chan 0 carries bytes to it, chan 1 from it. */
export const PortConnect = Type.Object(
  {
    tool: Type.Literal("port.connect"),
    port: Type.Integer({ minimum: 1, maximum: 65535 }),
    address: Type.Optional(Type.Union([Type.Literal("127.0.0.1"), Type.Literal("::1")])),
  },
  { additionalProperties: false },
);
export const ListeningPort = Type.Object({
  port: Type.Integer({ minimum: 1, maximum: 65535 }),
  /** The address it is bound to, as the kernel reports it. */
  address: Type.String({ maxLength: 64 }),
  family: Type.Union([Type.Literal("ipv4"), Type.Literal("ipv6")]),
  /** The process holding the socket, when the guest can see it (absent from older guests). */
  process: Type.Optional(
    Type.Object({ pid: Type.Integer({ minimum: 1 }), name: Type.String({ maxLength: 64 }) }, { additionalProperties: false }),
  ),
});
export type ListeningPort = Static<typeof ListeningPort>;
export const PortListResult = Type.Array(ListeningPort, { maxItems: 4096 });

// The browser: one Chromium per box, started on the first browser.open, its
// tabs driven over CDP by the guest. Refs name elements of a tab's snapshots;
// they stay the same across snapshots of one document, and a ref whose
// element left the page is refused as stale, never resolved to another one.
/** A tab's id, guest-local. */
export const TabId = Type.String({
  pattern: "^tab_[0-9]+$",
  maxLength: 32,
  title: "tab",
  rule: "a tab id: tab_ and digits (see hutch browser tabs)",
});
/** A ref from a snapshot: `e` and a number. */
export const Ref = Type.String({ pattern: "^e[0-9]{1,9}$", title: "ref", rule: "a ref from the last snapshot: e and digits, e.g. e3" });
const Url = Type.String({ minLength: 1, maxLength: 8192 });
const TimeoutMs = Type.Integer({ minimum: 0, maximum: 120_000 });
/** The most bytes of snapshot text one answer carries; the rest is fetched with `more`. */
export const SNAPSHOT_MAX_BYTES = 1_000_000;
export const SNAPSHOT_DEFAULT_BYTES = 24_000;
/** Where a cut snapshot continues: the snapshot's number and the line to go on from. */
const Cursor = Type.String({ pattern: "^s[0-9]{1,9}:[0-9]{1,9}$", rule: "the cursor a snapshot gave (sN:M)" });
const tabTool = <T extends string, P extends TProperties>(tool: T, props: P) =>
  Type.Object({ tool: Type.Literal(tool), tab: TabId, ...props }, { additionalProperties: false });

export const BrowserOpen = Type.Object(
  { tool: Type.Literal("browser.open"), url: Type.Optional(Url), timeoutMs: Type.Optional(TimeoutMs) },
  { additionalProperties: false },
);
export const BrowserTabs = Type.Object({ tool: Type.Literal("browser.tabs") }, { additionalProperties: false });
export const BrowserNavigate = tabTool("browser.navigate", { url: Url, timeoutMs: Type.Optional(TimeoutMs) });
export const BrowserClose = tabTool("browser.close", {});
export const BrowserSnapshot = tabTool("browser.snapshot", {
  maxBytes: Type.Optional(Type.Integer({ minimum: 256, maximum: SNAPSHOT_MAX_BYTES })),
  /** Only what changed since this tab's last snapshot (a full one when the document is new). */
  delta: Type.Optional(Type.Boolean()),
  /** Go on with a cut snapshot from its cursor instead of taking a new one. */
  more: Type.Optional(Cursor),
});
export const BrowserAction = Type.Union([
  Type.Literal("click"),
  Type.Literal("type"),
  Type.Literal("press"),
  Type.Literal("hover"),
  Type.Literal("select"),
  Type.Literal("scroll"),
  Type.Literal("upload"),
]);
export type BrowserAction = Static<typeof BrowserAction>;
export const BrowserAct = tabTool("browser.act", {
  action: BrowserAction,
  /** The element; `press` without one goes to whatever has focus. */
  ref: Type.Optional(Ref),
  /** type: the text that replaces the field's value. */
  text: Type.Optional(Type.String({ maxLength: 100_000 })),
  /** press: a key name (Enter, Tab, Escape, ArrowDown, a, …). */
  key: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
  /** type: press Enter after typing. */
  submit: Type.Optional(Type.Boolean()),
  /** select: the option values (or labels) to select. */
  values: Type.Optional(Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 256 })),
  /** upload: files in the box's roots. */
  paths: Type.Optional(Type.Array(GuestPath, { minItems: 1, maxItems: 64 })),
});
export const BrowserWait = tabTool("browser.wait", {
  text: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
  ref: Type.Optional(Ref),
  timeoutMs: Type.Optional(TimeoutMs),
});
export const BrowserScreenshot = tabTool("browser.screenshot", {
  ref: Type.Optional(Ref),
  fullPage: Type.Optional(Type.Boolean()),
});
export const BrowserConsole = tabTool("browser.console", {});
export const BrowserNetwork = tabTool("browser.network", {});

// The desktop: an Xvfb display started on demand (desktop.start), whose
// DISPLAY every process started afterwards gets. Input has one owner at a
// time: the first actor to send input holds it until it releases it, and
// others are refused unless they steal it. `owner` is stamped by the daemon
// from the caller's connection, never taken from the client.
const Coord = Type.Integer({ minimum: 0, maximum: 16_384 });
const Owner = Type.String({ minLength: 1, maxLength: 300 });
export const DesktopStart = Type.Object(
  {
    tool: Type.Literal("desktop.start"),
    width: Type.Optional(Type.Integer({ minimum: 64, maximum: 3840 })),
    height: Type.Optional(Type.Integer({ minimum: 64, maximum: 2160 })),
  },
  { additionalProperties: false },
);
export const DesktopScreenshot = Type.Object({ tool: Type.Literal("desktop.screenshot") }, { additionalProperties: false });
export const DesktopWindows = Type.Object({ tool: Type.Literal("desktop.windows") }, { additionalProperties: false });
export const DesktopInputAction = Type.Union([
  Type.Literal("move"),
  Type.Literal("click"),
  Type.Literal("drag"),
  Type.Literal("key"),
  Type.Literal("type"),
]);
export const DesktopInput = Type.Object(
  {
    tool: Type.Literal("desktop.input"),
    action: DesktopInputAction,
    owner: Type.Optional(Owner),
    /** Take the input from its owner (logged). */
    steal: Type.Optional(Type.Boolean()),
    x: Type.Optional(Coord),
    y: Type.Optional(Coord),
    /** drag: where to. */
    toX: Type.Optional(Coord),
    toY: Type.Optional(Coord),
    button: Type.Optional(Type.Integer({ minimum: 1, maximum: 9 })),
    /** key: X keysym names, pressed in turn (Return, ctrl+c, a). */
    keys: Type.Optional(
      Type.Array(
        Type.String({ pattern: "^[A-Za-z0-9_+]{1,64}$", rule: "a key name such as Return or ctrl+c: letters, digits, '_' and '+'" }),
        { minItems: 1, maxItems: 64 },
      ),
    ),
    /** type: text, typed as key events. */
    text: Type.Optional(Type.String({ maxLength: 4096 })),
  },
  { additionalProperties: false },
);
export const DesktopRelease = Type.Object(
  { tool: Type.Literal("desktop.release"), owner: Type.Optional(Owner) },
  { additionalProperties: false },
);

// MCP for agents inside the box: the guest serves the browser and desktop
// tools (./mcp-tools.ts) over MCP's streamable HTTP on the box's loopback
// while this stream is open, behind a bearer token it makes up. It answers
// `result {port, token}` once it listens, then tells the host of every call
// (McpCallMsg, McpDoneMsg) so the host can log it; closing the stream stops
// the listener. `owner` is who desktop input from this server is held by (the
// daemon sets it to the agent's actor id). With `approvals`, it also serves
// MCP_APPROVAL_TOOL, the agent's permission prompt: each call is sent to the
// host as McpApprovalMsg and answered with what the host's
// McpApprovalAnswerMsg says (the agent runs with `--permissions ask`).
export const McpServe = Type.Object(
  { tool: Type.Literal("mcp.serve"), owner: Type.Optional(Owner), approvals: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
/** The permission prompt tool (Claude Code's `--permission-prompt-tool mcp__hutch__approval_prompt`). */
export const MCP_APPROVAL_TOOL = "approval_prompt";
/** Its input, as Claude Code calls it: the tool it wants to use and that tool's input. */
export const McpApprovalInput = Type.Object({
  tool_name: Type.String({ minLength: 1, maxLength: 200 }),
  input: Type.Record(Type.String(), Type.Unknown()),
  tool_use_id: Type.Optional(Type.String({ maxLength: 200 })),
});
export type McpApprovalInput = Static<typeof McpApprovalInput>;
/** Host → guest on mcp.serve: the answer to an approval the agent asked for. */
export const McpApprovalAnswerMsg = Type.Object({
  type: Type.Literal("mcp.approval.answer"),
  id: Type.String({ pattern: "^ask_[0-9]{1,12}$", rule: "an ask id: ask_ and digits" }),
  allow: Type.Boolean(),
  message: Type.String({ maxLength: 2048 }),
});
export type McpApprovalAnswerMsg = Static<typeof McpApprovalAnswerMsg>;
export const McpServeResult = Type.Object({
  port: Type.Integer({ minimum: 1, maximum: 65535 }),
  token: Type.String({ pattern: "^[A-Za-z0-9_-]{32,128}$", rule: "32-128 letters, digits, '_' or '-'" }),
});
export type McpServeResult = Static<typeof McpServeResult>;
/** How much of a call's output the guest reports to the host (the session log's cut). */
export const MCP_OUTPUT_MAX = 4096;

export const ToolOpen = Type.Union([
  ExecOpen,
  PtyOpen,
  PtyAttach,
  PtyList,
  PtyKill,
  FsStat,
  FsList,
  FsRead,
  FsWrite,
  TarOut,
  TarIn,
  SnapOut,
  NetListen,
  NetAccept,
  PortList,
  PortConnect,
  BrowserOpen,
  BrowserTabs,
  BrowserNavigate,
  BrowserClose,
  BrowserSnapshot,
  BrowserAct,
  BrowserWait,
  BrowserScreenshot,
  BrowserConsole,
  BrowserNetwork,
  DesktopStart,
  DesktopScreenshot,
  DesktopWindows,
  DesktopInput,
  DesktopRelease,
  McpServe,
]);
export type ToolOpen = Static<typeof ToolOpen>;
export type ToolName = ToolOpen["tool"];

// Host → guest messages on a stream.
export const SignalMsg = Type.Object({
  type: Type.Literal("signal"),
  signal: Type.String({ pattern: "^[A-Z0-9]+$", maxLength: 16, rule: "a signal name in capitals, e.g. TERM" }),
});
export const ResizeMsg = Type.Object({ type: Type.Literal("resize"), cols: Cols, rows: Rows });
export const HostMsg = Type.Union([SignalMsg, ResizeMsg]);
export type HostMsg = Static<typeof HostMsg>;

// Guest → host messages on a stream.
export const StartedMsg = Type.Object({
  type: Type.Literal("started"),
  pid: Type.Integer({ minimum: 1 }),
  pty: Type.Optional(PtyId),
});
export const ExitMsg = Type.Object({
  type: Type.Literal("exit"),
  code: Type.Union([Type.Integer({ minimum: 0, maximum: 255 }), Type.Null()]),
  signal: Type.Union([Type.String({ maxLength: 16 }), Type.Null()]),
});
export const ResultMsg = Type.Object({ type: Type.Literal("result"), value: Type.Unknown() });
/** The next `bytes` bytes on chan 1 redraw the current screen (attach, or catching up); they are not new output. */
export const ScreenMsg = Type.Object({ type: Type.Literal("screen"), bytes: Type.Integer({ minimum: 0 }) });
/** net.listen: a connection arrived; take it with net.accept {conn}. */
export const ConnMsg = Type.Object({ type: Type.Literal("conn"), conn: Type.Integer({ minimum: 1 }) });
/** mcp.serve: an MCP client in the box called a tool (long strings in `input` cut by the guest). */
export const McpCallMsg = Type.Object({
  type: Type.Literal("mcp.call"),
  id: Type.String({ pattern: "^call_[0-9]{1,12}$", rule: "a call id: call_ and digits" }),
  name: Type.String({ minLength: 1, maxLength: 64 }),
  input: Type.Unknown(),
});
/** mcp.serve: a client has the tool list (it initialized, naming itself, and listed the tools). */
export const McpClientMsg = Type.Object({
  type: Type.Literal("mcp.client"),
  name: Type.String({ maxLength: 128 }),
  version: Type.String({ maxLength: 64 }),
});
/** mcp.serve: that call ended. */
export const McpDoneMsg = Type.Object({
  type: Type.Literal("mcp.done"),
  id: Type.String({ pattern: "^call_[0-9]{1,12}$", rule: "a call id: call_ and digits" }),
  name: Type.String({ minLength: 1, maxLength: 64 }),
  status: Type.Union([Type.Literal("ok"), Type.Literal("error")]),
  output: Type.String({ maxLength: MCP_OUTPUT_MAX }),
  ms: Type.Integer({ minimum: 0 }),
});
/** mcp.serve with approvals: the agent asks to use a tool (its name and input, long strings cut by the guest). */
export const McpApprovalMsg = Type.Object({
  type: Type.Literal("mcp.approval"),
  id: Type.String({ pattern: "^ask_[0-9]{1,12}$", rule: "an ask id: ask_ and digits" }),
  tool: Type.String({ minLength: 1, maxLength: 200 }),
  input: Type.Unknown(),
});
export const GuestMsg = Type.Union([
  StartedMsg,
  ExitMsg,
  ResultMsg,
  ScreenMsg,
  ConnMsg,
  McpCallMsg,
  McpDoneMsg,
  McpClientMsg,
  McpApprovalMsg,
]);
export type GuestMsg = Static<typeof GuestMsg>;
export type ExitMsg = Static<typeof ExitMsg>;

// Results carried in ResultMsg.value, per tool.
export const FileStat = Type.Object({
  path: Type.String({ maxLength: 4096 }),
  type: Type.Union([Type.Literal("file"), Type.Literal("dir"), Type.Literal("symlink"), Type.Literal("other")]),
  size: Type.Integer({ minimum: 0 }),
  mode: Type.Integer({ minimum: 0 }),
  mtimeMs: Type.Number(),
  target: Type.Optional(Type.String({ maxLength: 4096 })),
});
export type FileStat = Static<typeof FileStat>;
/** The most entries fs.list answers with; a larger directory is an error. */
export const FS_LIST_MAX = 100_000;
/** fs.list: the directory's entries by name, sorted, not followed (a symlink is one, with its target). */
export const FsListResult = Type.Array(Type.Composite([Type.Object({ name: Type.String({ minLength: 1, maxLength: 255 }) }), FileStat]), {
  maxItems: FS_LIST_MAX,
});
export type FsListResult = Static<typeof FsListResult>;
/** fs.read, fs.write: the bytes read or written. */
export const FsSizeResult = Type.Object({ size: Type.Integer({ minimum: 0 }) });
export type FsSizeResult = Static<typeof FsSizeResult>;
/** tar.out: the bytes of archive sent on chan 1. */
export const TarOutResult = Type.Object({ size: Type.Integer({ minimum: 0 }) });
export type TarOutResult = Static<typeof TarOutResult>;
/** tar.in: the entries unpacked, and the bytes of their contents. */
export const TarInResult = Type.Object({ entries: Type.Integer({ minimum: 0 }), bytes: Type.Integer({ minimum: 0 }) });
export type TarInResult = Static<typeof TarInResult>;
export const PtyInfo = Type.Object({
  id: PtyId,
  argv: Type.Array(Type.String()),
  pid: Type.Integer(),
  cols: Cols,
  rows: Rows,
  startedAt: Type.String(),
  attached: Type.Integer({ minimum: 0 }),
});
export type PtyInfo = Static<typeof PtyInfo>;
export const PtyListResult = Type.Array(PtyInfo, { maxItems: 10000 });
export const PtyKillResult = Type.Object({ id: PtyId, pid: Type.Integer(), signal: Type.String({ maxLength: 16 }) });

/** A tab: what browser.open, navigate, act and tabs answer with. */
export const TabInfo = Type.Object({
  tab: TabId,
  url: Type.String({ maxLength: 8192 }),
  title: Type.String({ maxLength: 1024 }),
});
export type TabInfo = Static<typeof TabInfo>;
export const BrowserTabsResult = Type.Array(TabInfo, { maxItems: 256 });
/**
 * browser.snapshot on the wire: the text goes on chan 1 as UTF-8 (`size`
 * bytes; a large page's snapshot is bigger than one frame), this is the result.
 */
export const BrowserSnapshotWire = Type.Object({
  tab: TabId,
  url: Type.String({ maxLength: 8192 }),
  title: Type.String({ maxLength: 1024 }),
  delta: Type.Boolean(),
  /** The whole snapshot's size and line count, whatever this answer carries. */
  bytes: Type.Integer({ minimum: 0 }),
  lines: Type.Integer({ minimum: 0 }),
  /** The bytes of text sent on chan 1. */
  size: Type.Integer({ minimum: 0, maximum: SNAPSHOT_MAX_BYTES + 65536 }),
  /** Set when the text was cut: pass it as `more` for the next part. */
  more: Type.Optional(Cursor),
});
export type BrowserSnapshotWire = Static<typeof BrowserSnapshotWire>;
/** A snapshot as the host hands it on: the wire result with its text. */
export const BrowserSnapshotResult = Type.Composite([
  Type.Omit(BrowserSnapshotWire, ["size"]),
  Type.Object({
    /** Ref-tagged lines (`- button "Save" [ref=e3]`), nested by two spaces; a delta's lines start with `+ ` or `- ` before the indent. */
    text: Type.String({ maxLength: SNAPSHOT_MAX_BYTES + 65536 }),
  }),
]);
export type BrowserSnapshotResult = Static<typeof BrowserSnapshotResult>;
/** browser.screenshot: the PNG's bytes went on chan 1. */
export const BrowserScreenshotResult = Type.Object({
  width: Type.Integer({ minimum: 0 }),
  height: Type.Integer({ minimum: 0 }),
  size: Type.Integer({ minimum: 0 }),
});
export type BrowserScreenshotResult = Static<typeof BrowserScreenshotResult>;
export const ConsoleEntry = Type.Object({
  level: Type.String({ maxLength: 16 }),
  text: Type.String({ maxLength: 4096 }),
  at: Type.Number(),
});
export const BrowserConsoleResult = Type.Array(ConsoleEntry, { maxItems: 1000 });
export const NetworkEntry = Type.Object({
  method: Type.String({ maxLength: 16 }),
  url: Type.String({ maxLength: 2048 }),
  type: Type.String({ maxLength: 32 }),
  status: Type.Optional(Type.Integer({ minimum: 0, maximum: 999 })),
  failed: Type.Optional(Type.String({ maxLength: 256 })),
});
export const BrowserNetworkResult = Type.Array(NetworkEntry, { maxItems: 1000 });
export const BrowserWaitResult = Type.Object({ tab: TabId, waitedMs: Type.Integer({ minimum: 0 }) });

export const DesktopInfo = Type.Object({
  display: Type.String({ pattern: "^:[0-9]{1,4}$", rule: "an X display, e.g. :99" }),
  width: Type.Integer({ minimum: 0 }),
  height: Type.Integer({ minimum: 0 }),
});
export type DesktopInfo = Static<typeof DesktopInfo>;
export const DesktopWindow = Type.Object({
  id: Type.Integer({ minimum: 0 }),
  name: Type.String({ maxLength: 1024 }),
  x: Type.Integer(),
  y: Type.Integer(),
  width: Type.Integer({ minimum: 0 }),
  height: Type.Integer({ minimum: 0 }),
});
/** desktop.screenshot: the PNG's bytes went on chan 1, as browser.screenshot's. */
export const DesktopScreenshotResult = BrowserScreenshotResult;
export const DesktopWindowsResult = Type.Array(DesktopWindow, { maxItems: 256 });
/** desktop.input, desktop.release: who holds the input afterwards (null: nobody). */
export const DesktopInputResult = Type.Object({ owner: Type.Union([Owner, Type.Null()]), stolenFrom: Type.Optional(Owner) });

// The hellos.
export const HostHello = Type.Object({
  protocol: Type.Integer(),
  client: Type.String(),
  version: Type.String(),
  /** The host's clock (ms since the epoch): a VM restored from sleep sets its clock by it. */
  time: Type.Optional(Type.Number()),
  /** Echoed in the guest's hello: a hello left over from an earlier connection on a virtio port names another. */
  nonce: Type.Optional(Type.String({ maxLength: 64 })),
});
export type HostHello = Static<typeof HostHello>;
export const GuestHello = Type.Object({
  protocol: Type.Integer({ minimum: 1 }),
  agent: Type.String({ maxLength: 64 }),
  version: Type.String({ maxLength: 64 }),
  capabilities: Type.Array(Type.String({ maxLength: 32 }), { maxItems: 64 }),
  window: Type.Integer({ minimum: 1024 }),
  roots: Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 16 }),
  /** The host hello's nonce this answers. */
  answers: Type.Optional(Type.String({ maxLength: 64 })),
});
export type GuestHello = Static<typeof GuestHello>;

// Stream-0 control messages, host → guest.
export const ShutdownMsg = Type.Object({ type: Type.Literal("shutdown"), graceMs: Type.Integer({ minimum: 0, maximum: 600000 }) });
export type ShutdownMsg = Static<typeof ShutdownMsg>;
/** The host's clock (ms since the epoch), sent when a connection carries on across a VM's sleep: its clock stood still. */
export const ClockMsg = Type.Object({ type: Type.Literal("clock"), time: Type.Number() });
export type ClockMsg = Static<typeof ClockMsg>;
/**
 * The box's name (its hostname) and id (HUTCH_BOX_ID), sent on every new
 * connection to a guest with the `identity` capability: a VM woken from a
 * warm pool's sleep was booted as another box, and carries on as this one.
 */
export const IdentityMsg = Type.Object({
  type: Type.Literal("identity"),
  name: Type.String({
    pattern: "^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$",
    rule: "a hostname: lowercase letters, digits and inner dashes, at most 63",
  }),
  id: Type.String({ pattern: idPattern("box"), rule: "a box id: box_ and 20 lowercase letters or digits" }),
});
export type IdentityMsg = Static<typeof IdentityMsg>;

export const CAPABILITIES = ["exec", "pty", "fs", "tar", "net", "ports", "browser", "desktop", "mcp", "chunks", "identity"] as const;
