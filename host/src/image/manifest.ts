// manifest.json of an image: what it was built from and the checksum of every
// file, so a copied or imported image can be verified before a box boots it.
import { check, firstError, HutchError, ImageManifest, MANIFEST_FORMAT } from "@hutch/shared";

export { MANIFEST_FORMAT };

/** The files of an image directory besides manifest.json (image/BOOT.md). */
export const IMAGE_FILES = ["vmlinuz", "initramfs.img", "root.qcow2"] as const;
export type ImageFile = (typeof IMAGE_FILES)[number];

/** The schema is shared: the manifest is also the result of an image build through the daemon. */
export const Manifest = ImageManifest;
export type Manifest = ImageManifest;

/** A parsed manifest.json, or an error naming the first bad field. */
export function validateManifest(value: unknown, where: string): Manifest {
  if (check(Manifest, value)) return value;
  throw new HutchError(
    "invalid",
    `${where}: not a hutch image manifest (${firstError(Manifest, value)})`,
    "rebuild the image: hutch image build --force",
  );
}

/** sha256 of a file, streamed; `read` hears each chunk's size (progress). */
export async function sha256File(path: string, read: (bytes: number) => void = () => {}): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) {
    hasher.update(chunk);
    read(chunk.byteLength);
  }
  return hasher.digest("hex");
}
