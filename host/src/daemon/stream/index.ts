// WebSocket endpoint for tool streams: /v1/boxes/:ref/stream. The client
// speaks the guest protocol (one frame per WebSocket message): hello, then one
// open; the daemon validates it and relays it to the box's channel.
import { Elysia, t } from "elysia";
import { HUTCH_VERSION, HostHello, check, firstError, HutchError, Mux, PROTOCOL_VERSION, ProtocolError, ToolOpen, CAPABILITIES, type MuxStream } from "@hutch/shared";
import type { BoxService } from "../boxes/service.ts";
import { relay } from "./relay.ts";
import { log } from "../../log.ts";

const logger = log.create({ service: "stream" });

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

export function streamController(boxes: BoxService) {
  const muxes = new Map<string, Mux>();
  return new Elysia().ws("/v1/boxes/:ref/stream", {
    params: t.Object({ ref: t.String({ minLength: 1, maxLength: 128 }) }),
    detail: { summary: "Tool stream: guest-protocol frames over WebSocket (see guest/PROTOCOL.md)" },
    open(ws) {
      const ref = ws.data.params.ref;
      let opened = false;
      const mux: Mux = new Mux(
        { write: (bytes) => void ws.raw.send(bytes), close: () => ws.raw.close() },
        {
          role: "guest",
          onHello(hello) {
            if (!check(HostHello, hello) || hello.protocol !== PROTOCOL_VERSION) {
              mux.fail(new ProtocolError(`client hello must be protocol ${PROTOCOL_VERSION}`));
              return;
            }
            mux.sendHello({ protocol: PROTOCOL_VERSION, agent: "hutch-daemon", version: HUTCH_VERSION, capabilities: [...CAPABILITIES], window: 2 * 1024 * 1024, roots: [] });
          },
          onOpen(stream, payload) {
            if (opened) {
              stream.close({ code: "invalid", message: "one tool stream per connection" });
              return;
            }
            opened = true;
            openStream(boxes, ref, stream, payload);
          },
          onError(err) {
            logger.warn("client broke the protocol", { err: err.message });
          },
        },
      );
      muxes.set(ws.id, mux);
    },
    message(ws, message) {
      const mux = muxes.get(ws.id);
      if (!mux) return;
      if (!(message instanceof Uint8Array)) {
        mux.fail(new ProtocolError("text message on a binary stream"));
        return;
      }
      mux.feed(message);
    },
    close(ws) {
      muxes.get(ws.id)?.lost("client went away");
      muxes.delete(ws.id);
    },
  });
}
