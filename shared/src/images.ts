// Images through the daemon: the list, a verify (an operation: hashing a root
// disk takes a while), and an import, whose archive is uploaded in chunks and
// then installed by an operation (shared/src/ops.ts). The archive travels as
// raw bytes, in order, each chunk under the API's body bound; the daemon
// unpacks it as it arrives (bounded, checked, never run) and nothing reaches
// the image store until every file matched the manifest.
import { Type, type Static } from "@sinclair/typebox";
import { WholeNumber } from "./api.ts";
import { idPattern } from "./ids.ts";
import { ImageManifest, ImageName } from "./ops.ts";

export const IMAGE_LIMITS = {
  /** The largest archive an import takes (the desktop image is ~1.1 GiB). */
  archiveBytes: 32 * 1024 ** 3,
  /** The largest chunk of an upload: half the API's body bound. */
  chunkBytes: 8 * 1024 ** 2,
  /** An upload that receives nothing for this long is dropped, and its staging removed. */
  idleMs: 120_000,
} as const;

// GET /v1/images
/** An installed image, or a broken one with why it cannot be used (so it can be removed). */
export const ImageEntry = Type.Object(
  { name: ImageName, manifest: Type.Optional(ImageManifest), problem: Type.Optional(Type.String()) },
  { additionalProperties: false },
);
export type ImageEntry = Static<typeof ImageEntry>;
export const ImageList = Type.Array(ImageEntry);
export type ImageList = Static<typeof ImageList>;

// GET /v1/images/:name/verify (NDJSON: counts, then this)
export const ImageVerifyResult = Type.Object({ name: ImageName, ok: Type.Literal(true) }, { additionalProperties: false });
export type ImageVerifyResult = Static<typeof ImageVerifyResult>;

export const ImportId = Type.String({
  pattern: idPattern("upl"),
  title: "import id",
  rule: "an id from POST /v1/images/imports (upl_ and 20 letters or digits)",
});

// POST /v1/images/imports
export const ImageImportStart = Type.Object(
  {
    /** The archive's size: the upload must bring exactly this many bytes. */
    bytes: Type.Integer({ minimum: 1, maximum: IMAGE_LIMITS.archiveBytes, title: "bytes" }),
    /** Install under this name instead of the manifest's. */
    name: Type.Optional(ImageName),
    /** Replace an image of the same name. */
    force: Type.Optional(Type.Boolean()),
    /** The archive's file name as the person gave it, for messages ("default.tar is not a hutch image archive: …"). */
    file: Type.Optional(Type.String({ minLength: 1, maxLength: 255, title: "file" })),
  },
  { additionalProperties: false },
);
export type ImageImportStart = Static<typeof ImageImportStart>;

/** An upload in progress: where the next chunk starts, and how large one may be. */
export const ImageUpload = Type.Object(
  { id: ImportId, received: Type.Integer({ minimum: 0 }), bytes: Type.Integer({ minimum: 1 }), chunkBytes: Type.Integer({ minimum: 1 }) },
  { additionalProperties: false },
);
export type ImageUpload = Static<typeof ImageUpload>;

// PATCH /v1/images/imports/:id?offset=N (body: the next bytes, application/octet-stream)
export const ImageChunkQuery = Type.Object({ offset: WholeNumber(0, IMAGE_LIMITS.archiveBytes) }, { additionalProperties: false });

// POST /v1/images/imports/:id/install (NDJSON: steps and counts, then this)
export const ImageImportResult = Type.Object({ manifest: ImageManifest }, { additionalProperties: false });
export type ImageImportResult = Static<typeof ImageImportResult>;
