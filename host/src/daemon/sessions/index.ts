// HTTP for sessions: parse, validate, stamp the actor, call the service.
import { Elysia } from "elysia";
import { API_LIMITS, eventKinds, HutchError } from "@hutch/shared";
import type { SessionService } from "../../session/service.ts";
import type { SessionLog } from "../../store/types.ts";
import { actorUser } from "../../actors.ts";
import { actorFrom, type Identify } from "../actor.ts";
import { idempotencyKey } from "../idempotency.ts";
import { SessionModel } from "./model.ts";

export function sessionsController(
  sessions: SessionService,
  store: SessionLog,
  identify: Identify,
  /** Refuses a box named in a body that the caller may not drive (server mode); the path's are checked before. */
  mayDrive: (req: Request, boxRef: string) => void = () => {},
) {
  return (
    new Elysia({ prefix: "/v1", tags: ["sessions"], normalize: false })
      .derive(({ request }) => ({ actor: actorFrom(request, identify) }))
      .get("/event-kinds", () => eventKinds(), { detail: { summary: "Every registered event kind" } })
      .post(
        "/sessions",
        async ({ body, actor, set, request }) => {
          if (body.box) mayDrive(request, body.box);
          set.status = 201;
          return sessions.create(body, actor);
        },
        { body: SessionModel.create, detail: { summary: "Start a session (creates a box when none is named)" } },
      )
      // In a fleet, a read first catches this server's replica up with the fleet's log (fresh): it sees every acknowledged write.
      .get(
        "/sessions",
        async ({ query, actor }) => {
          await sessions.writer.fresh();
          return sessions.list(actor, query);
        },
        {
          query: SessionModel.list,
          detail: { summary: "List sessions" },
        },
      )
      .get(
        "/sessions/:id",
        async ({ params, actor }) => {
          await sessions.writer.fresh();
          return sessions.get(params.id, actor);
        },
        {
          params: SessionModel.id,
        },
      )
      .get(
        "/sessions/:id/summary",
        async ({ params, actor }) => {
          await sessions.writer.fresh();
          return sessions.summary(params.id, actor);
        },
        {
          params: SessionModel.id,
          detail: { summary: "A session with its turn, activity and anchored annotations, as of its last seq" },
        },
      )
      .get("/summaries", ({ query, actor }) => sessions.summaryList(actor, query), {
        query: SessionModel.list,
        detail: { summary: "Every session's summary (what GET /v1/sessions lists, each with its turn, activity and anchored annotations)" },
      })
      .get(
        "/sessions/:id/events",
        async ({ params, query, actor }) => {
          const from = query.from ?? 1;
          const limit = query.limit ?? 1000;
          // In a fleet, a page that ends before this server's copy of the log does is what a caught-up copy would
          // answer (events never change): only one that may reach the copy's end catches up with the fleet's log first.
          if (from + limit > store.last(params.id)) await sessions.writer.fresh();
          sessions.row(params.id, actor);
          const page = store.readText(params.id, from, limit, ",", API_LIMITS.eventsPageLength);
          // An EventsPage: events are stored as JSON, so the page is assembled without re-parsing them.
          return new Response(`{"events":[${page.text}],"next":${page.last + 1},"last":${store.last(params.id)}}`, {
            headers: { "content-type": "application/json" },
          });
        },
        {
          params: SessionModel.id,
          query: SessionModel.page,
          response: SessionModel.eventsPage,
          detail: { summary: "A page of events from a seq" },
        },
      )
      .post(
        "/sessions/:id/events",
        async ({ params, body, headers, actor }) => {
          // One key for the request; each event in it gets its own, derived, so a repeat returns every first seq.
          const key = idempotencyKey(headers, actorUser(actor));
          return {
            seqs: await sessions.appendFromClient(
              params.id,
              actor,
              key ? body.events.map((e, i) => ({ ...e, idempotencyKey: `${key}#${i}` })) : body.events,
            ),
          };
        },
        {
          params: SessionModel.id,
          body: SessionModel.append,
          headers: SessionModel.idem,
          detail: { summary: "Append events (client kinds only; an Idempotency-Key makes a repeat return the first seqs)" },
        },
      )
      .post(
        "/sessions/:id/input",
        async ({ params, body, headers, actor }) => ({
          seq: await sessions.input(params.id, actor, body.text, idempotencyKey(headers, actorUser(actor)) ?? undefined),
        }),
        {
          params: SessionModel.id,
          body: SessionModel.input,
          headers: SessionModel.idem,
          detail: { summary: "Type into the session's terminal (driver only)" },
        },
      )
      .post("/sessions/:id/interrupt", ({ params, actor }) => sessions.interrupt(params.id, actor), {
        params: SessionModel.id,
        response: SessionModel.interrupted,
        detail: { summary: "Stop the agent's turn (driver only); answers once the turn has ended in the log" },
      })
      .post(
        "/sessions/:id/annotations",
        async ({ params, body, headers, actor }) => ({
          seq: await sessions.annotate(params.id, actor, body.text, body.anchor, idempotencyKey(headers, actorUser(actor)) ?? undefined),
        }),
        {
          params: SessionModel.id,
          body: SessionModel.annotate,
          headers: SessionModel.idem,
          detail: { summary: "Annotate the session (anyone who can see it)" },
        },
      )
      .post("/sessions/:id/driver/acquire", ({ params, body, actor }) => sessions.acquire(params.id, actor, body?.leaseMs), {
        params: SessionModel.id,
        body: SessionModel.driver,
      })
      .post("/sessions/:id/driver/release", ({ params, actor }) => sessions.release(params.id, actor), { params: SessionModel.id })
      .post("/sessions/:id/driver/steal", ({ params, body, actor }) => sessions.steal(params.id, actor, body?.leaseMs), {
        params: SessionModel.id,
        body: SessionModel.driver,
      })
      .post("/sessions/:id/driver/heartbeat", ({ params, actor }) => sessions.heartbeat(params.id, actor), { params: SessionModel.id })
      .post(
        "/sessions/:id/fork",
        async ({ params, body, actor, set }) => {
          set.status = 201;
          return sessions.fork(params.id, actor, body);
        },
        {
          params: SessionModel.id,
          body: SessionModel.fork,
          response: { 201: SessionModel.forked },
          detail: { summary: "A new box and session from the session's checkpoint at or before a seq" },
        },
      )
      .post("/sessions/:id/close", ({ params, body, actor }) => sessions.close(params.id, actor, body?.reason), {
        params: SessionModel.id,
        body: SessionModel.close,
      })
      .get(
        "/sessions/:id/output/:chunk",
        ({ params, actor }) => {
          sessions.row(params.id, actor);
          const bytes = store.chunk(params.id, params.chunk);
          if (bytes === "dropped")
            throw new HutchError(
              "not_found",
              `output chunk ${params.chunk} of session ${params.id} was dropped to keep the session's stored terminal output under its cap`,
              `its output.dropped event says how much and why: hutch session log ${params.id}`,
              { dropped: true },
            );
          if (!bytes)
            throw new HutchError(
              "not_found",
              `session ${params.id} has no output chunk ${params.chunk}`,
              `see its events: hutch session log ${params.id}`,
            );
          return new Response(bytes, { headers: { "content-type": "application/octet-stream" } });
        },
        { params: SessionModel.chunk, detail: { summary: "Raw terminal bytes of one output chunk" } },
      )
  );
}
