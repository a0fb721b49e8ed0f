// HTTP for boxes: parse, validate, call the service. No logic here.
import { Elysia } from "elysia";
import { type Box, HutchError } from "@hutch/shared";
import type { BoxService } from "../../box/service.ts";
import { idempotencyKey as idem } from "../idempotency.ts";
import { actorFrom, localUser, type Identify } from "../actor.ts";
import { BoxModel } from "./model.ts";

/** Whose boxes a request sees, and whom a box it creates belongs to. */
export interface BoxOwnership {
  visible(req: Request, boxId: string): boolean;
  /** In a fleet: this server's node name, and the boxes other servers run that the request may see, each with its server. */
  fleet?: { node: string; elsewhere(req: Request): Promise<Box[]> };
  owner(req: Request): string;
  /** Refuses a snapshot the caller may not see as the source of a fork (server mode), as if it did not exist. */
  snapshot?(req: Request, ref: string): Promise<void>;
}

export function boxesController(boxes: BoxService, own: BoxOwnership, identify: Identify = localUser) {
  /** A box of this server as the API shows it: in a fleet, with this server's name. */
  const here = (b: Box): Box => (own.fleet ? { ...b, server: own.fleet.node } : b);
  return new Elysia({ prefix: "/v1/boxes", tags: ["boxes"], normalize: false })
    .get(
      "/",
      async ({ request }) => {
        const mine = boxes.list().filter((b) => own.visible(request, b.id));
        if (!own.fleet) return mine;
        return [...mine.map(here), ...(await own.fleet.elsewhere(request))];
      },
      {
        response: BoxModel.boxes,
        detail: { summary: "List the boxes this caller may see" },
      },
    )
    .post(
      "/",
      async ({ body, headers, set, request }) => {
        if (!own.fleet && (body.node !== undefined || body.on !== undefined))
          throw new HutchError(
            "invalid",
            `${body.node !== undefined ? "node" : "on"}: places a box in a fleet, and this server is not one`,
            "drop --node/--on, or start servers with hutch serve --cluster",
          );
        if (body.from !== undefined) await own.snapshot?.(request, body.from);
        set.status = 201;
        const owner = own.owner(request);
        return here(await boxes.create(body, idem(headers, owner), owner));
      },
      { body: BoxModel.create, headers: BoxModel.idem, detail: { summary: "Create a box (and start it when start is true)" } },
    )
    .get("/:ref", ({ params }) => here(boxes.get(params.ref)), { params: BoxModel.ref, detail: { summary: "One box, by name or id" } })
    .patch("/:ref", ({ params, body }) => boxes.set(params.ref, body), {
      params: BoxModel.ref,
      body: BoxModel.set,
      response: BoxModel.box,
      detail: { summary: "Change a stopped box's limits (applied at its next start)" },
    })
    .post("/:ref/start", ({ params, headers, request }) => boxes.start(params.ref, idem(headers, own.owner(request))), {
      params: BoxModel.ref,
      headers: BoxModel.idem,
      detail: { summary: "Start a box" },
    })
    .post("/:ref/stop", ({ params, headers, request }) => boxes.stop(params.ref, idem(headers, own.owner(request))), {
      params: BoxModel.ref,
      headers: BoxModel.idem,
      detail: { summary: "Stop a box: graceful, then forced after a timeout" },
    })
    .post("/:ref/pause", ({ params, headers, request }) => boxes.pause(params.ref, idem(headers, own.owner(request))), {
      params: BoxModel.ref,
      headers: BoxModel.idem,
      detail: { summary: "Freeze a box (VM engines)" },
    })
    .post("/:ref/resume", ({ params, headers, request }) => boxes.resume(params.ref, idem(headers, own.owner(request))), {
      params: BoxModel.ref,
      headers: BoxModel.idem,
      detail: { summary: "Thaw a paused box" },
    })
    .post("/:ref/sleep", ({ params, request }) => boxes.sleep(params.ref, actorFrom(request, identify)), {
      params: BoxModel.ref,
      detail: { summary: "Put a running box to sleep: its state to disk, no process left (idempotent)" },
    })
    .post("/:ref/wake", ({ params, request }) => boxes.wake(params.ref, actorFrom(request, identify)), {
      params: BoxModel.ref,
      detail: { summary: "Wake an asleep box (idempotent; concurrent callers share one wake)" },
    })
    .delete("/:ref", ({ params, headers, request }) => boxes.delete(params.ref, idem(headers, own.owner(request))), {
      params: BoxModel.ref,
      headers: BoxModel.idem,
      response: BoxModel.deleted,
      detail: { summary: "Delete a box and verify nothing of it is left" },
    });
}
