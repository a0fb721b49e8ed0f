// HTTP for images: the list, a verify and a build (operations, daemon/ops.ts;
// the build run by the image build worker), an import uploaded in chunks and
// installed by an operation, and removing a name. A build of a name already
// building is refused before the answer starts; so is removing one boxes are
// built on, and installing an upload that is not whole. Who may do what is
// daemon/access.ts's: reads for every user, changes for the admin.
// No logic here.
import { Elysia, t } from "elysia";
import { ImageBuildBody, ImageChunkQuery, ImageImportStart, ImageList, ImageName, ImageUpload, ImportId } from "@hutch/shared";
import type { ImageBuilds } from "../../image/worker.ts";
import type { ImageImports } from "../../image/uploads.ts";
import { imageVerifier, listImages } from "../../image/index.ts";
import type { BoxService } from "../../box/service.ts";
import { opResponse, type RunningOps } from "../ops.ts";

const named = { params: t.Object({ name: ImageName }) };
const upload = { params: t.Object({ id: ImportId }) };

export function imagesController(home: string, builds: ImageBuilds, imports: ImageImports, running: RunningOps, boxes: BoxService) {
  return new Elysia({ prefix: "/v1/images", tags: ["images"], normalize: false })
    .get("/", () => listImages(home), {
      response: ImageList,
      detail: { summary: "The images, usable or not (a broken one with its problem)" },
    })
    .get("/:name/verify", ({ params, request }) => opResponse("image.verify", request, running, imageVerifier(home, params.name)), {
      ...named,
      detail: { summary: "Check every file of an image against its manifest's sha256 (NDJSON: counts, then the result)" },
    })
    .delete(
      "/:name",
      ({ params }) => {
        builds.remove(
          params.name,
          (ids) => ids.map((id) => boxes.byId(id)?.name ?? id).join(", "),
          (id) => boxes.hidden(id),
        );
        return { name: params.name, removed: true as const };
      },
      { ...named, detail: { summary: "Remove an image name (refused while boxes are built on it)" } },
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
    )
    .post(
      "/imports",
      ({ body, set }) => {
        set.status = 201;
        return imports.start(body);
      },
      {
        body: ImageImportStart,
        response: { 201: ImageUpload },
        detail: { summary: "Start an image import: then PATCH the archive's bytes in order, then POST …/install" },
      },
    )
    .post("/imports/:id/install", ({ params, request }) => opResponse("image.import", request, running, imports.install(params.id)), {
      ...upload,
      detail: { summary: "Verify and install an uploaded image archive (NDJSON: steps and counts, then the manifest)" },
    })
    .delete(
      "/imports/:id",
      async ({ params }) => {
        await imports.abort(params.id);
        return { id: params.id, dropped: true as const };
      },
      { ...upload, detail: { summary: "Drop an image import and what it received" } },
    );
}

/**
 * The chunks of an import: raw bytes, so mounted before the app's JSON body
 * parser (daemon/app.ts), and read here as a stream, bounded by the upload.
 */
export function imageChunksController(imports: ImageImports) {
  return new Elysia({ prefix: "/v1/images", tags: ["images"], normalize: false }).patch(
    "/imports/:id",
    ({ params, query, request }) => imports.write(params.id, query.offset, request.body),
    {
      ...upload,
      parse: "none",
      query: ImageChunkQuery,
      response: ImageUpload,
      detail: { summary: "The next bytes of an import's archive (application/octet-stream), from `offset`" },
    },
  );
}
