// HTTP for dispatch: start one (it runs in the daemon, whoever asked, and is
// followed through its orchestration session), read its state, cancel it.
// No logic here.
import { Elysia } from "elysia";
import { HutchError } from "@hutch/shared";
import type { DispatchService } from "../../dispatch/service.ts";
import { actorUser } from "../../session/actors.ts";
import { actorFrom, type Identify } from "../actor.ts";
import { DispatchModel } from "./model.ts";

/**
 * `local`: whether the request may use dispatches. In server mode a remote
 * user's would reach other users' snapshots and boxes, so they are the local
 * user's and the server admin's only, for now.
 */
export function dispatchController(dispatches: DispatchService, identify: Identify, local: (req: Request) => boolean = () => true) {
  return new Elysia({ prefix: "/v1", tags: ["dispatch"], normalize: false })
    .onBeforeHandle(({ request }) => {
      if (!local(request))
        throw new HutchError("denied", "dispatches are the server admin's in server mode", "run it on the server, or with an admin token");
    })
    .post(
      "/dispatches",
      async ({ body, request, set }) => {
        set.status = 201;
        return dispatches.create(body, actorUser(actorFrom(request, identify)));
      },
      {
        body: DispatchModel.create,
        response: { 201: DispatchModel.dispatch },
        detail: { summary: "Start a dispatch: k workers forked from one snapshot, graded by a check, one winner kept" },
      },
    )
    .get("/dispatches", () => dispatches.list(), { response: DispatchModel.dispatches, detail: { summary: "Every dispatch" } })
    .get("/dispatches/:id", ({ params }) => dispatches.get(params.id), {
      params: DispatchModel.id,
      response: DispatchModel.dispatch,
      detail: { summary: "A dispatch's state: its workers, verdicts and winner" },
    })
    .post("/dispatches/:id/cancel", ({ params }) => dispatches.cancel(params.id), {
      params: DispatchModel.id,
      response: DispatchModel.dispatch,
      detail: { summary: "Stop a dispatch: its workers' turns stopped, its boxes deleted, logs, diffs and verdicts kept" },
    });
}
