// Installed images: where they live under $HUTCH_HOME/images/<name>/, reading,
// listing, verifying, replacing and removing them.
import { existsSync, readFileSync, readdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { IMAGE_FILES, sha256File, validateManifest, type Manifest } from "./manifest.ts";
import { makeStaging, removeTree } from "./staging.ts";

export const DEFAULT_IMAGE = "default";
const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

export function checkImageName(name: string): void {
  if (!NAME.test(name)) throw new HutchError("invalid", `bad image name ${JSON.stringify(name)}: use lower-case letters, digits and dashes`, "e.g. hutch image build --name default");
}

export const imagesDir = (home: string): string => join(home, "images");

export function imagePaths(home: string, name: string) {
  checkImageName(name);
  const dir = join(imagesDir(home), name);
  return {
    dir,
    kernel: join(dir, "vmlinuz"),
    initramfs: join(dir, "initramfs.img"),
    root: join(dir, "root.qcow2"),
    manifest: join(dir, "manifest.json"),
  };
}
export type ImagePaths = ReturnType<typeof imagePaths>;

/**
 * The manifest of an installed image, checked against the files beside it by
 * size (hashing a root disk on every boot would cost seconds; import and
 * `hutch image verify` hash every file).
 */
export function loadImage(home: string, name: string): Manifest {
  const p = imagePaths(home, name);
  if (!existsSync(p.manifest)) throw new HutchError("not_found", `no image "${name}"`, "build it: hutch image build" + (name === DEFAULT_IMAGE ? "" : ` --name ${name}`));
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(p.manifest, "utf8"));
  } catch (err) {
    throw new HutchError("invalid", `image "${name}": manifest.json is not JSON (${(err as Error).message})`, `rebuild it: hutch image build --name ${name} --force`);
  }
  const m = validateManifest(raw, `image "${name}"`);
  for (const f of IMAGE_FILES) {
    const path = join(p.dir, f);
    const size = existsSync(path) ? statSync(path).size : -1;
    if (size !== m.files[f].bytes) {
      throw new HutchError("invalid", `image "${name}": ${f} is ${size < 0 ? "missing" : `${size} bytes, the manifest says ${m.files[f].bytes}`}`, `rebuild it: hutch image build --name ${name} --force`);
    }
  }
  return m;
}

export interface ImageEntry {
  name: string;
  manifest?: Manifest;
  /** Why the image cannot be used, when it cannot. */
  problem?: string;
}

/** Every image directory, usable or not (a broken one is listed with its problem, so it can be removed). */
export function listImages(home: string): ImageEntry[] {
  const dir = imagesDir(home);
  if (!existsSync(dir)) return [];
  const names = readdirSync(dir).filter((n) => !n.startsWith(".") && NAME.test(n)).sort();
  const out: ImageEntry[] = [];
  for (const name of names) {
    try {
      out.push({ name, manifest: loadImage(home, name) });
    } catch (err) {
      out.push({ name, problem: (err as Error).message });
    }
  }
  return out;
}

/** Removes an image at once (renamed aside first, so it never half-exists). */
export function removeImage(home: string, name: string): void {
  const p = imagePaths(home, name);
  if (!existsSync(p.dir)) throw new HutchError("not_found", `no image "${name}"`, "see the images there are: hutch image list");
  const trash = makeStaging(imagesDir(home), `rm-${name}`);
  renameSync(p.dir, join(trash, name));
  removeTree(trash);
}

/** Moves a finished image directory into place, replacing any old one; the old one is removed after. */
export function installImage(home: string, name: string, ready: string, scratch: string): void {
  const p = imagePaths(home, name);
  if (existsSync(p.dir)) renameSync(p.dir, join(scratch, "replaced"));
  renameSync(ready, p.dir);
}

/** Checks every file's sha256 against the manifest of the image directory `dir`; throws naming the first mismatch. */
export async function verifyFiles(dir: string, m: Manifest, what: string, hint: string): Promise<void> {
  for (const f of IMAGE_FILES) {
    const path = join(dir, f);
    if (!existsSync(path)) throw new HutchError("invalid", `${what}: ${f} is missing`, hint);
    const sum = await sha256File(path);
    if (sum !== m.files[f].sha256) throw new HutchError("invalid", `${what}: ${f} has sha256 ${sum}, the manifest says ${m.files[f].sha256}`, hint);
  }
}
