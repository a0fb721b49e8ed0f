// `hutch ide --stdio`: the bridge between the VS Code extension and the
// daemon. JSON-RPC with LSP framing (vscode-languageserver), so the
// extension's vscode-languageclient brings restarts and tracing; custom
// hutch/... methods (schemas in shared/src/ide.ts) for the sidebar, logs and
// annotations, and textDocument/publishDiagnostics for anchored annotations.
import { createConnection, ResponseError, type Connection } from "vscode-languageserver/node";
import { fileURLToPath } from "node:url";
import { selectedTransport } from "../client/remotes.ts";
import {
  HUTCH_VERSION,
  HutchError,
  IDE_PROTOCOL_VERSION,
  IdeMethods,
  IdeNotifications,
  type AnnotateBody,
  type AnnotateParams,
  type Box,
  type BoxCreateBody,
  type BoxParams,
  type Change,
  type DriverBody,
  type DriverParams,
  type InterruptParams,
  type ListResult,
  type SendParams,
  type Session,
  type SessionCreateBody,
  type SessionCreateParams,
  type SessionInputBody,
  type SubscribeParams,
  type UnsubscribeParams,
} from "@hutch/shared";
import { waitingClient, type DaemonClient } from "../client/daemon.ts";
import { Feed } from "./feed.ts";
import { DiagnosticsStore } from "./diagnostics.ts";
import { SessionWatchers } from "./watchers.ts";
import { outputTexts } from "./output.ts";
import { ClientSubscriptions } from "./subscriptions.ts";
import { SessionTails } from "./tails.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "ide" });
const sessionPath = (id: string, rest = "") => `/v1/sessions/${encodeURIComponent(id)}${rest}`;

/** Daemon errors become JSON-RPC errors whose data carries the code and the next step. */
function rpcError(err: unknown): ResponseError<{ code: string; hint?: string }> {
  const e = err instanceof HutchError ? err : new HutchError("failed", err instanceof Error ? err.message : String(err));
  return new ResponseError(-32000, e.message, { code: e.code, ...(e.hint ? { hint: e.hint } : {}) });
}

function handle<P, R>(conn: Connection, method: string, fn: (p: P) => Promise<R>): void {
  conn.onRequest(method, async (p: P): Promise<unknown> => {
    try {
      return await fn(p);
    } catch (err) {
      return rpcError(err);
    }
  });
}

export interface BridgeOptions {
  home: string;
  input?: NodeJS.ReadableStream;
  output?: NodeJS.WritableStream;
}

/** Runs the bridge until the client says exit or closes stdin. */
export function runBridge(opts: BridgeOptions): Promise<number> {
  const conn = createConnection(opts.input ?? process.stdin, opts.output ?? process.stdout);
  const daemon: DaemonClient = waitingClient(opts.home, "ide", selectedTransport() ?? undefined);
  let root: string | null = null;

  // The daemon is reached while the client's handshake is still under way; nothing is sent to the
  // client before it said initialized, and no summary is read into diagnostics before the root is known.
  let rootKnown!: () => void;
  const rooted = new Promise<void>((r) => (rootKnown = r));
  let initialized!: () => void;
  const ready = new Promise<void>((r) => (initialized = r));
  const notify = (method: string, params: unknown) => void ready.then(() => conn.sendNotification(method, params));

  const diagnostics = new DiagnosticsStore((uri, list) => void ready.then(() => conn.sendDiagnostics({ uri, diagnostics: list })));
  const changed = (c: Change) => notify(IdeNotifications.changed, c);
  // One subscription per session, shared by its watcher and its log views.
  const tails = new SessionTails(daemon);
  const watchers = new SessionWatchers(
    daemon,
    tails,
    () => root,
    diagnostics,
    (session) => changed({ type: "session", session }),
  );
  const subs = new ClientSubscriptions(tails, {
    events: async (n) => {
      // The text each output event printed goes with it; a chunk that cannot be read now leaves the row as its size.
      const output = await outputTexts(daemon, n.session, n.events).catch((err) => {
        logger.warn("reading output for a log view failed", { session: n.session, error: String(err) });
        return [];
      });
      await conn.sendNotification(IdeNotifications.events, output.length ? { ...n, output } : n);
    },
    ended: (n) => void conn.sendNotification(IdeNotifications.subscriptionEnded, n),
  });

  // What the sidebar lists, as of the feed's last (re)open: summaries, not logs, and the boxes read with them.
  let loaded: Promise<void> = Promise.resolve();
  let boxesAtOpen: Promise<Box[]> | null = null;
  const feed = new Feed(daemon, {
    up: async () => {
      logger.info("daemon connected", { daemon: daemon.transport.where });
      boxesAtOpen = daemon.request<Box[]>("GET", "/v1/boxes");
      boxesAtOpen.catch(() => undefined);
      loaded = watchers.loadAll(rooted);
      await loaded.catch((err) => logger.warn("reading session summaries failed", { error: String(err) }));
      notify(IdeNotifications.daemon, { connected: true });
    },
    down: (reason) => {
      logger.info("daemon not reachable", { reason });
      boxesAtOpen = null;
      notify(IdeNotifications.daemon, { connected: false, reason });
    },
    change: (c) => {
      if (c.type !== "session") {
        // A box line after the boxes were read: the next list reads them again.
        boxesAtOpen = null;
        return changed(c);
      }
      watchers.refresh(c.session.id).then(
        (session) => session && changed({ type: "session", session }),
        (err) => logger.warn("reading a session summary failed", { session: c.session.id, error: String(err) }),
      );
    },
  });

  conn.onInitialize((params) => {
    const folder = params.workspaceFolders?.[0]?.uri ?? params.rootUri;
    root = folder?.startsWith("file:") ? fileURLToPath(folder) : null;
    rootKnown();
    return {
      capabilities: {},
      serverInfo: { name: "hutch", version: HUTCH_VERSION },
      hutch: { protocolVersion: IDE_PROTOCOL_VERSION, home: opts.home },
    };
  });
  conn.onInitialized(() => initialized());

  handle<void, ListResult>(conn, IdeMethods.list, async () => {
    if (!feed.connected) return { connected: false, boxes: [], sessions: [] };
    // The sessions are the watchers' (summaries kept current by the feed and the tails); a failed load is tried again.
    const boxes = boxesAtOpen ?? daemon.request<Box[]>("GET", "/v1/boxes");
    boxesAtOpen = null;
    const [list] = await Promise.all([boxes, loaded.catch(() => (loaded = watchers.loadAll(rooted)))]);
    // The summaries' diagnostics go out right behind this answer, all at once, rather than ahead of it.
    setImmediate(() => diagnostics.flush());
    return { connected: true, boxes: list, sessions: watchers.views() };
  });
  handle<SubscribeParams, { subscription: string }>(conn, IdeMethods.subscribe, async (p) => ({
    subscription: subs.open(p.session, p.from),
  }));
  handle<UnsubscribeParams, { closed: boolean }>(conn, IdeMethods.unsubscribe, async (p) => ({ closed: subs.close(p.subscription) }));
  handle<SendParams, { seq: number }>(conn, IdeMethods.send, (p) => {
    const key = crypto.randomUUID();
    return daemon.request("POST", sessionPath(p.session, "/input"), { text: p.text } satisfies SessionInputBody, { idempotencyKey: key });
  });
  handle<AnnotateParams, { seq: number }>(conn, IdeMethods.annotate, (p) => {
    const key = crypto.randomUUID();
    return daemon.request(
      "POST",
      sessionPath(p.session, "/annotations"),
      { text: p.text, ...(p.anchor ? { anchor: p.anchor } : {}) } satisfies AnnotateBody,
      { idempotencyKey: key },
    );
  });
  handle<DriverParams, Session>(conn, IdeMethods.driver, (p) =>
    daemon.request(
      "POST",
      sessionPath(p.session, `/driver/${p.action}`),
      p.action === "release" || p.action === "heartbeat" ? undefined : ((p.leaseMs ? { leaseMs: p.leaseMs } : {}) satisfies DriverBody),
    ),
  );
  handle<InterruptParams, unknown>(conn, IdeMethods.interrupt, (p) => daemon.request("POST", sessionPath(p.session, "/interrupt")));
  handle<BoxParams, unknown>(conn, IdeMethods.box, (p) => {
    const key = crypto.randomUUID();
    const ref = encodeURIComponent(p.name);
    if (p.action === "create")
      return daemon.request(
        "POST",
        "/v1/boxes",
        { name: p.name, ...(p.engine ? { engine: p.engine } : {}), ...(p.start ? { start: true } : {}) } satisfies BoxCreateBody,
        { idempotencyKey: key },
      );
    if (p.action === "delete") return daemon.request("DELETE", `/v1/boxes/${ref}`, undefined, { idempotencyKey: key });
    return daemon.request("POST", `/v1/boxes/${ref}/${p.action}`, undefined, { idempotencyKey: key });
  });
  handle<SessionCreateParams, Session>(conn, IdeMethods.sessionCreate, (p) =>
    daemon.request("POST", "/v1/sessions", {
      ...(p.box ? { box: p.box } : {}),
      ...(p.agent ? { agent: p.agent } : {}),
      ...(p.label ? { label: p.label } : {}),
      ...(p.headless ? { headless: true } : {}),
    } satisfies SessionCreateBody),
  );

  return new Promise<number>((resolve) => {
    let shutdown = false;
    conn.onShutdown(() => {
      shutdown = true;
    });
    const end = (code: number) => {
      feed.stop();
      subs.closeAll();
      watchers.close();
      tails.closeAll();
      resolve(code);
    };
    // vscode-languageserver exits the process after this (and when stdin closes).
    conn.onExit(() => end(shutdown ? 0 : 1));
    conn.listen();
    feed.start();
  });
}
