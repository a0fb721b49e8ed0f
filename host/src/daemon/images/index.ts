// HTTP for images: the build, an operation (daemon/ops.ts) run by the image
// build worker, and removing a name. A build of a name already building is
// refused before the answer starts; so is removing one boxes are built on.
// No logic here.
import { Elysia, t } from "elysia";
import { ImageBuildBody } from "@hutch/shared";
import type { ImageBuilds } from "../../image/worker.ts";
import type { BoxService } from "../../box/service.ts";
import { opResponse, type RunningOps } from "../ops.ts";

export function imagesController(builds: ImageBuilds, running: RunningOps, boxes: BoxService) {
  return new Elysia({ prefix: "/v1/images", tags: ["images"], normalize: false })
    .delete(
      "/:name",
      ({ params }) => {
        builds.remove(params.name, (ids) => ids.map((id) => boxes.byId(id)?.name ?? id).join(", "));
        return { name: params.name, removed: true as const };
      },
      {
        params: t.Object({ name: t.String({ minLength: 1, maxLength: 63 }) }),
        detail: { summary: "Remove an image name (refused while boxes are built on it)" },
      },
    )
    .post(
      "/build",
      ({ body, request }) => {
        const build = builds.claim(body);
        return opResponse("image.build", request, running, build);
      },
      {
        body: ImageBuildBody,
        detail: { summary: "Build an image from Debian packages (the daemon must be root; NDJSON: progress, then the manifest)" },
      },
    );
}
