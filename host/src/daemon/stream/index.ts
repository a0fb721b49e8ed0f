// Tool streams: GET /v1/boxes/:ref/stream upgrades to a WebSocket that carries
// the guest protocol itself (one frame per message): hello, then one open,
// which the daemon validates and relays to the box's channel.
//
// The socket is served by Bun's own WebSocket handlers, not Elysia's: Elysia
// parses every message on its way to the handler, which cost more CPU than the
// whole relay on the 1 GiB `exec cat` benchmark. Elysia still answers the
// plain GET (426) so the endpoint is in the OpenAPI document.
import { Elysia, t } from "elysia";
import type { Server, ServerWebSocket, WebSocketHandler } from "bun";
import {
  type Actor,
  HUTCH_VERSION,
  HostHello,
  check,
  firstError,
  HutchError,
  Mux,
  PROTOCOL_VERSION,
  ProtocolError,
  ToolOpen,
  CAPABILITIES,
  DEFAULT_WINDOW,
  type MuxStream,
} from "@hutch/shared";
import type { BoxService } from "../../box/service.ts";
import type { Activity } from "../../box/idle.ts";
import { actorFrom, principalOf, type Identify } from "../actor.ts";
import { holdEarly, relay } from "./relay.ts";
import { log } from "../../log.ts";

const logger = log.create({ service: "stream" });
const STREAM_PATH = /^\/v1\/boxes\/([^/]{1,128})\/stream$/;

export interface StreamSocketData {
  ref: string;
  /** Attaching to a session's terminal (?session=ID[&steal=1]): the driver slot and input logging apply. */
  session?: { id: string; actor: Actor; steal: boolean };
  /** Who opened the stream, from its connection: the desktop's input owner is stamped from it. */
  actor?: Actor;
  mux?: Mux;
  /** The token the socket was opened with (server mode): revoking it closes the socket. */
  token?: string;
}

/** What the stream endpoint needs from sessions to attach a client to one. */
export interface SessionAttacher {
  /**
   * Takes the driver slot for the actor (or steals it), makes sure the
   * session's terminal runs, and returns where it is plus hooks to log typed
   * input and to give the slot back when the client leaves.
   */
  attach(id: string, actor: Actor, steal: boolean): Promise<{ box: string; pty: string; input(bytes: Uint8Array): void; end(): void }>;
  /** Desktop or browser input into a box: refused unless the actor drives the box's sessions (or none has a driver); see SessionService.boxInput. */
  boxInput?(boxId: string, actor: Actor, steal: boolean): Promise<{ driving: boolean }>;
}

const closeWith = (client: MuxStream, err: unknown) => {
  const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
  client.close({ code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) });
};

/** What each tool keeps a box awake as (box/idle.ts): a person at a terminal, browser or desktop is a client. */
function activityOf(tool: ToolOpen["tool"]): Activity {
  if (tool.startsWith("pty.") || tool.startsWith("browser.") || tool.startsWith("desktop.")) return "client";
  if (tool === "port.connect") return "forward";
  return "exec";
}

/** Holds a box awake for as long as a stream lasts; the function returned ends the hold. */
export type HoldBox = (boxId: string, kind: Activity) => () => void;

async function openStream(
  boxes: BoxService,
  sessions: SessionAttacher | undefined,
  data: StreamSocketData,
  client: MuxStream,
  raw: unknown,
  hold: HoldBox,
): Promise<void> {
  if (!check(ToolOpen, raw)) {
    client.close({ code: "invalid", message: `bad tool call: ${firstError(ToolOpen, raw)}` });
    return;
  }
  let payload: ToolOpen = raw;
  // Who the desktop's input is held by: the caller, never what a client put there (mcp.serve: its server's input).
  if (payload.tool === "desktop.input" || payload.tool === "desktop.release" || payload.tool === "mcp.serve") {
    if (!data.actor) return closeWith(client, new HutchError("invalid", "the desktop's input needs a caller the daemon can name"));
    payload = { ...payload, owner: data.actor.id };
  }
  if ((payload.tool === "desktop.input" || payload.tool === "browser.act") && sessions?.boxInput) {
    if (!data.actor) return closeWith(client, new HutchError("invalid", "input into a box needs a caller the daemon can name"));
    try {
      const steal = payload.tool === "desktop.input" && payload.steal === true;
      const { driving } = await sessions.boxInput((await boxes.awake(data.ref, data.actor)).box.id, data.actor, steal);
      // The driver's input takes the guest's slot from whoever held it.
      if (driving && payload.tool === "desktop.input") payload = { ...payload, steal: true };
    } catch (err) {
      return closeWith(client, err);
    }
  }
  let ref = data.ref;
  let attached: Awaited<ReturnType<SessionAttacher["attach"]>> | undefined;
  if (data.session) {
    if (payload.tool !== "pty.attach" || !sessions) {
      client.close({ code: "invalid", message: "a session stream carries one pty.attach" });
      return;
    }
    try {
      attached = await sessions.attach(data.session.id, data.session.actor, data.session.steal);
    } catch (err) {
      return closeWith(client, err);
    }
    // The session knows its terminal; the client's idea of it may be stale (the box restarted).
    payload = { ...payload, id: attached.pty };
    // Never retarget a stream to another box than the one it was opened (and its access checked) for.
    if (boxes.find(ref)?.id !== attached.box) {
      attached.end();
      return closeWith(
        client,
        new HutchError("not_found", `box "${ref}" has no session "${data.session.id}"`, "attach through the session's own box"),
      );
    }
    ref = attached.box;
  }
  let target: Awaited<ReturnType<typeof boxes.awake>>;
  try {
    // The one place a stream (exec, cp, attach, ports, browser, desktop, MCP) reaches a box: an asleep one wakes here.
    target = await boxes.awake(ref, data.actor);
  } catch (err) {
    attached?.end();
    return closeWith(client, err);
  }
  const { box, channel } = target;
  const guest = channel.mux.open(payload);
  const release = hold(box.id, activityOf((payload as ToolOpen).tool));
  relay(client, guest, {
    onGuestViolation: (reason) => channel.mux.fail(new ProtocolError(reason)),
    ...(attached ? { onInput: attached.input } : {}),
    onClose: () => {
      release();
      attached?.end();
    },
  });
  logger.debug("stream opened", { box: box.name, tool: (payload as ToolOpen).tool });
}

/** Upgrades a stream request; returns false when the request is not one. */
export function upgradeStream(req: Request, server: Server<StreamSocketData>, identify: Identify): boolean {
  const url = new URL(req.url);
  const m = STREAM_PATH.exec(url.pathname);
  if (!m || req.headers.get("upgrade")?.toLowerCase() !== "websocket") return false;
  const sessionId = url.searchParams.get("session");
  const session = sessionId ? { id: sessionId, actor: actorFrom(req, identify), steal: url.searchParams.get("steal") === "1" } : undefined;
  const token = principalOf(req)?.token;
  let actor: Actor | undefined;
  try {
    actor = session?.actor ?? actorFrom(req, identify);
  } catch {
    // A caller the daemon cannot name may still use tools that need no owner.
  }
  return server.upgrade(req, {
    data: { ref: decodeURIComponent(m[1]!), ...(session ? { session } : {}), ...(token ? { token } : {}), ...(actor ? { actor } : {}) },
  });
}

export function streamSocket(
  boxes: BoxService,
  sessions?: SessionAttacher,
  hold: HoldBox = () => () => {},
): WebSocketHandler<StreamSocketData> {
  return {
    maxPayloadLength: 1024 * 1024,
    open(ws: ServerWebSocket<StreamSocketData>) {
      let opened = false;
      const mux: Mux = new Mux(
        { write: (bytes) => void ws.send(bytes), close: () => ws.close() },
        {
          role: "guest",
          onHello(hello) {
            if (!check(HostHello, hello) || hello.protocol !== PROTOCOL_VERSION) {
              mux.fail(new ProtocolError(`client hello must be protocol ${PROTOCOL_VERSION}`));
              return;
            }
            mux.sendHello({
              protocol: PROTOCOL_VERSION,
              agent: "hutch-daemon",
              version: HUTCH_VERSION,
              capabilities: [...CAPABILITIES],
              window: DEFAULT_WINDOW,
              roots: [],
            });
          },
          onOpen(stream, payload) {
            if (opened) {
              stream.close({ code: "invalid", message: "one tool stream per connection" });
              return;
            }
            opened = true;
            holdEarly(stream);
            void openStream(boxes, sessions, ws.data, stream, payload, hold);
          },
          onError(err) {
            logger.warn("client broke the protocol", { err: err.message });
          },
        },
      );
      ws.data.mux = mux;
    },
    message(ws, message) {
      const mux = ws.data.mux;
      if (!mux) return;
      if (typeof message === "string") {
        mux.fail(new ProtocolError("text message on a binary stream"));
        return;
      }
      mux.feed(message);
    },
    close(ws) {
      ws.data.mux?.lost("client went away");
    },
  };
}

/** The OpenAPI entry for the endpoint; a plain GET is told to upgrade. */
export function streamDoc() {
  return new Elysia().get(
    "/v1/boxes/:ref/stream",
    ({ set }) => {
      set.status = 426;
      return new HutchError(
        "invalid",
        "this endpoint speaks WebSocket",
        "connect with a WebSocket client (see guest/PROTOCOL.md)",
      ).toBody();
    },
    {
      params: t.Object({ ref: t.String({ minLength: 1, maxLength: 128 }) }),
      detail: {
        summary: "Tool stream: upgrade to WebSocket and speak the guest protocol, one frame per binary message (guest/PROTOCOL.md)",
      },
    },
  );
}
