// HTTP for dispatch: start one (it runs in the daemon, whoever asked, and is
// followed through its orchestration session), read its state, cancel it.
// No logic here.
import { Elysia } from "elysia";
import { HutchError } from "@hutch/shared";
import type { DispatchService } from "../../dispatch/service.ts";
import { actorUser } from "../../actors.ts";
import { actorFrom, type Identify } from "../actor.ts";
import { OPEN, type DispatchAccess } from "./access.ts";
import { DispatchModel } from "./model.ts";

/** `access`: server mode's rules (./access.ts); without it every caller is the local user and sees everything. */
export function dispatchController(
  dispatches: DispatchService,
  identify: Identify,
  access: DispatchAccess = OPEN,
  /** Takes n box creations from the caller's limit, all or none: a dispatch pays for its k workers before it starts. */
  prepay: <T>(n: number, fn: () => T) => T = (_n, fn) => fn(),
) {
  return new Elysia({ prefix: "/v1", tags: ["dispatch"], normalize: false })
    .onBeforeHandle(({ request }) => {
      if (!access.allowed(request))
        throw new HutchError("denied", "dispatches are the server admin's in server mode", "run it on the server, or with an admin token");
    })
    .post(
      "/dispatches",
      async ({ body, request, set }) => {
        await access.create(request, body);
        set.status = 201;
        const owner = actorUser(actorFrom(request, identify));
        return prepay(body.k, () => dispatches.create(body, owner));
      },
      {
        body: DispatchModel.create,
        response: { 201: DispatchModel.dispatch },
        detail: { summary: "Start a dispatch: k workers forked from one snapshot, graded by a check, one winner kept" },
      },
    )
    .get("/dispatches", ({ request }) => dispatches.list(access.scope(request)), {
      response: DispatchModel.dispatches,
      detail: { summary: "Every dispatch" },
    })
    .get("/dispatches/:id", ({ params, request }) => dispatches.get(params.id, access.scope(request)), {
      params: DispatchModel.id,
      response: DispatchModel.dispatch,
      detail: { summary: "A dispatch's state: its workers, verdicts and winner" },
    })
    .post("/dispatches/:id/cancel", ({ params, request }) => dispatches.cancel(params.id, access.scope(request)), {
      params: DispatchModel.id,
      response: DispatchModel.dispatch,
      detail: { summary: "Stop a dispatch: its workers' turns stopped, its boxes deleted, logs, diffs and verdicts kept" },
    });
}
