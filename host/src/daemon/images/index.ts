// HTTP for images: the build, an operation (daemon/ops.ts) run by the image
// build worker. A build of a name already building is refused before the
// answer starts. No logic here.
import { Elysia } from "elysia";
import { ImageBuildBody } from "@hutch/shared";
import type { ImageBuilds } from "../../image/worker.ts";
import { opResponse, type RunningOps } from "../ops.ts";

export function imagesController(builds: ImageBuilds, running: RunningOps) {
  return new Elysia({ prefix: "/v1/images", tags: ["images"], normalize: false }).post(
    "/build",
    ({ body, request }) => {
      const build = builds.claim(body);
      return opResponse("image.build", request, running, build);
    },
    { body: ImageBuildBody, detail: { summary: "Build an image from Debian packages (the daemon must be root; NDJSON: progress, then the manifest)" } },
  );
}
