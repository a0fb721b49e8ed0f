// GET /v1/changes: the change feed as NDJSON over a long-lived response.
// The first line is {"type":"hello"}; a {"type":"ping"} line every 5 s lets
// a client tell a quiet daemon from a gone one, and keeps Bun's idle timeout
// (10 s without bytes ends a response) from cutting a quiet feed.
import { Elysia } from "elysia";
import type { FeedLine } from "@hutch/shared";
import { actorFrom, principalOf, type Identify } from "../actor.ts";
import type { ChangeService } from "./service.ts";

const PING_MS = 5_000;

export function changesController(changes: ChangeService, identify: Identify) {
  return new Elysia({ prefix: "/v1", tags: ["changes"], normalize: false }).get(
    "/changes",
    ({ request }) => {
      const actor = actorFrom(request, identify);
      const enc = new TextEncoder();
      let stop = () => {};
      const body = new ReadableStream<Uint8Array>({
        start(ctl) {
          const line = (v: FeedLine) => {
            try {
              ctl.enqueue(enc.encode(`${JSON.stringify(v)}\n`));
            } catch {
              stop();
            }
          };
          const unwatch = changes.watch(actor, line);
          const ping = setInterval(() => line({ type: "ping" }), PING_MS);
          const offClose = changes.onClose(() => {
            stop();
            try {
              ctl.close();
            } catch {
              // already closed by the client
            }
          }, principalOf(request)?.token);
          stop = () => {
            unwatch();
            offClose();
            clearInterval(ping);
          };
          request.signal.addEventListener("abort", () => stop());
          line({ type: "hello" });
        },
        cancel() {
          stop();
        },
      });
      return new Response(body, { headers: { "content-type": "application/x-ndjson", "cache-control": "no-store" } });
    },
    { detail: { summary: "Live feed of box and session changes (NDJSON: hello, then box / box.removed / session lines, pings)" } },
  );
}
