// GET /v1/fleet/events?from=SEQ&follow=BOOL: the fleet's events (fleet/
// events.ts) as NDJSON, one FleetEvent a line, from SEQ (0 or none: the
// first kept), then, while following, each new one. Only a fleet server
// serves it; a remote caller needs an admin token (daemon/access.ts).
import { Elysia, t } from "elysia";
import type { FleetEvent } from "@hutch/shared";

export function fleetEventsController(events: { read(from: number, follow: boolean, signal: AbortSignal): AsyncIterable<FleetEvent> }) {
  return new Elysia({ prefix: "/v1", tags: ["fleet"], normalize: false }).get(
    "/fleet/events",
    ({ query, request }) => {
      const enc = new TextEncoder();
      const stop = new AbortController();
      request.signal.addEventListener("abort", () => stop.abort());
      const body = new ReadableStream<Uint8Array>({
        async start(ctl) {
          try {
            for await (const e of events.read(query.from ?? 0, query.follow ?? false, stop.signal))
              ctl.enqueue(enc.encode(`${JSON.stringify(e)}\n`));
          } catch {
            // The client went, or the cluster did: the feed ends; a reader resumes from its last seq.
          }
          try {
            ctl.close();
          } catch {
            // already closed by the client
          }
        },
        cancel() {
          stop.abort();
        },
      });
      return new Response(body, { headers: { "content-type": "application/x-ndjson", "cache-control": "no-store" } });
    },
    {
      query: t.Object({ from: t.Optional(t.Integer({ minimum: 0 })), follow: t.Optional(t.Boolean()) }),
      detail: { summary: "The fleet's events (NDJSON): boxes made, changing state, deleted; servers joining and leaving (admin)" },
    },
  );
}
