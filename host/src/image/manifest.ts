// manifest.json of an image: what it was built from and the checksum of every
// file, so a copied or imported image can be verified before a box boots it.
import { t, type Static } from "elysia";
import { check, firstError, HutchError } from "@hutch/shared";

export const MANIFEST_FORMAT = 1;

/** The files of an image directory besides manifest.json (image/BOOT.md). */
export const IMAGE_FILES = ["vmlinuz", "initramfs.img", "root.qcow2"] as const;
export type ImageFile = (typeof IMAGE_FILES)[number];

const FileInfo = t.Object({ bytes: t.Integer({ minimum: 0 }), sha256: t.String({ pattern: "^[0-9a-f]{64}$" }) });

export const Manifest = t.Object({
  format: t.Literal(MANIFEST_FORMAT),
  name: t.String({ pattern: "^[a-z0-9][a-z0-9-]{0,62}$" }),
  hutchVersion: t.String(),
  builtAt: t.String(),
  buildSeconds: t.Number({ minimum: 0 }),
  recipeHash: t.String({ pattern: "^[0-9a-f]{64}$" }),
  kernel: t.Object({ package: t.String(), version: t.String(), release: t.String() }),
  busybox: t.String(),
  modules: t.Array(t.String()),
  suite: t.String(),
  mirror: t.String(),
  packages: t.Array(t.String()),
  root: t.Object({ contentBytes: t.Integer({ minimum: 0 }), virtualBytes: t.Integer({ minimum: 0 }) }),
  files: t.Object({ vmlinuz: FileInfo, "initramfs.img": FileInfo, "root.qcow2": FileInfo }),
});
export type Manifest = Static<typeof Manifest>;

/** A parsed manifest.json, or an error naming the first bad field. */
export function validateManifest(value: unknown, where: string): Manifest {
  if (check(Manifest, value)) return value;
  throw new HutchError("invalid", `${where}: not a hutch image manifest (${firstError(Manifest, value)})`, "rebuild the image: hutch image build --force");
}

/** sha256 of a file, streamed. */
export async function sha256File(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}
