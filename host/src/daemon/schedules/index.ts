// HTTP for schedules: add, list, read, remove, pause, resume, run now. A
// schedule is its adder's: in server mode another user's is answered as
// missing, and one is added only on a box the caller may drive. No logic here.
import { Elysia } from "elysia";
import type { ScheduleService } from "../../schedule/service.ts";
import { actorUser } from "../../actors.ts";
import { actorFrom, principalOf, type Identify } from "../actor.ts";
import { ScheduleModel } from "./model.ts";

export function schedulesController(
  schedules: ScheduleService,
  identify: Identify,
  /** Throws when the caller may not drive the box a body names (server mode's rule). */
  checkBox: (req: Request, ref: string) => void,
) {
  // The local socket's user sees every schedule, as it sees every box; a remote user only its own.
  const scope = (req: Request) => (principalOf(req)?.remote ? principalOf(req)!.user : null);
  return new Elysia({ prefix: "/v1", tags: ["schedules"], normalize: false })
    .post(
      "/schedules",
      ({ body, request, set }) => {
        checkBox(request, body.box);
        set.status = 201;
        return schedules.create(body, actorUser(actorFrom(request, identify)));
      },
      {
        body: ScheduleModel.create,
        response: { 201: ScheduleModel.schedule },
        detail: { summary: "Add a schedule: a headless agent turn in a box, on a cron expression or once at a time" },
      },
    )
    .get("/schedules", ({ query, request }) => schedules.list(scope(request), query.box), {
      query: ScheduleModel.query,
      response: ScheduleModel.schedules,
      detail: { summary: "Every schedule (of one box when asked)" },
    })
    .get("/schedules/:id", ({ params, request }) => schedules.get(params.id, scope(request)), {
      params: ScheduleModel.id,
      response: ScheduleModel.schedule,
      detail: { summary: "A schedule, its next run and its last" },
    })
    .delete("/schedules/:id", ({ params, request }) => schedules.remove(params.id, scope(request)), {
      params: ScheduleModel.id,
      response: ScheduleModel.removed,
      detail: { summary: "Remove a schedule (a run in flight goes on to its end)" },
    })
    .post("/schedules/:id/pause", ({ params, request }) => schedules.pause(params.id, scope(request)), {
      params: ScheduleModel.id,
      response: ScheduleModel.schedule,
      detail: { summary: "Pause a schedule: no run until it is resumed" },
    })
    .post("/schedules/:id/resume", ({ params, request }) => schedules.resume(params.id, scope(request)), {
      params: ScheduleModel.id,
      response: ScheduleModel.schedule,
      detail: { summary: "Resume a schedule from now (runs missed while paused are not caught up)" },
    })
    .post("/schedules/:id/run", ({ params, request }) => schedules.runNow(params.id, scope(request)), {
      params: ScheduleModel.id,
      response: ScheduleModel.schedule,
      detail: { summary: "Run a schedule now; answers once its session exists" },
    });
}
