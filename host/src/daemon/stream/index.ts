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
import { HUTCH_VERSION, HostHello, check, firstError, HutchError, Mux, PROTOCOL_VERSION, ProtocolError, ToolOpen, CAPABILITIES, DEFAULT_WINDOW, type MuxStream } from "@hutch/shared";
import type { BoxService } from "../boxes/service.ts";
import { relay } from "./relay.ts";
import { log } from "../../log.ts";

const logger = log.create({ service: "stream" });
const STREAM_PATH = /^\/v1\/boxes\/([^/]{1,128})\/stream$/;

export interface StreamSocketData {
  ref: string;
  mux?: Mux;
}

function openStream(boxes: BoxService, ref: string, client: MuxStream, payload: unknown): void {
  if (!check(ToolOpen, payload)) {
    client.close({ code: "invalid", message: `bad tool call: ${firstError(ToolOpen, payload)}` });
    return;
  }
  let target;
  try {
    target = boxes.channel(ref);
  } catch (err) {
    const e = err instanceof HutchError ? err : new HutchError("failed", String(err));
    client.close({ code: e.code, message: e.hint ? `${e.message}; ${e.hint}` : e.message });
    return;
  }
  const { box, channel } = target;
  const guest = channel.mux.open(payload);
  relay(client, guest, {
    onGuestViolation: (reason) => channel.mux.fail(new ProtocolError(reason)),
  });
  logger.debug("stream opened", { box: box.name, tool: payload.tool });
}

/** Upgrades a stream request; returns false when the request is not one. */
export function upgradeStream(req: Request, server: Server<StreamSocketData>): boolean {
  const m = STREAM_PATH.exec(new URL(req.url).pathname);
  if (!m || req.headers.get("upgrade")?.toLowerCase() !== "websocket") return false;
  return server.upgrade(req, { data: { ref: decodeURIComponent(m[1]!) } });
}

export function streamSocket(boxes: BoxService): WebSocketHandler<StreamSocketData> {
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
            mux.sendHello({ protocol: PROTOCOL_VERSION, agent: "hutch-daemon", version: HUTCH_VERSION, capabilities: [...CAPABILITIES], window: DEFAULT_WINDOW, roots: [] });
          },
          onOpen(stream, payload) {
            if (opened) {
              stream.close({ code: "invalid", message: "one tool stream per connection" });
              return;
            }
            opened = true;
            openStream(boxes, ws.data.ref, stream, payload);
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
      return new HutchError("invalid", "this endpoint speaks WebSocket", "connect with a WebSocket client (see guest/PROTOCOL.md)").toBody();
    },
    {
      params: t.Object({ ref: t.String({ minLength: 1, maxLength: 128 }) }),
      detail: { summary: "Tool stream: upgrade to WebSocket and speak the guest protocol, one frame per binary message (guest/PROTOCOL.md)" },
    },
  );
}
