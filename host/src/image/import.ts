// `hutch image import FILE`: an image directory carried as a .tar (made with
// e.g. `tar -C ~/.local/share/hutch/images -cf default.tar default`). Unpacked
// with the safe tar reader into staging, every file checked against the
// manifest, then renamed into place; anything else is refused and removed.
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { HutchError, TarError } from "@hutch/shared";
import { createUnpacker } from "@hutch/shared/node";
import { IMAGE_FILES, validateManifest, type Manifest } from "./manifest.ts";
import { withStaging } from "./staging.ts";
import { checkImageName, imagePaths, imagesDir, installImage, overlayUsers, verifyFiles } from "./store.ts";

export interface ImportOptions {
  home: string;
  file: string;
  /** Install under this name instead of the manifest's. */
  name?: string;
  force: boolean;
}

const refuse = (file: string, why: string) =>
  new HutchError(
    "invalid",
    `${file} is not a hutch image archive: ${why}`,
    "make one from an image directory: tar -C $HUTCH_HOME/images -cf NAME.tar NAME",
  );

/** The directory holding manifest.json: the archive's top level, or its one top directory. */
function imageRoot(unpacked: string, file: string): string {
  if (existsSync(join(unpacked, "manifest.json"))) return unpacked;
  const tops = readdirSync(unpacked);
  const only = tops.length === 1 ? join(unpacked, tops[0]!) : undefined;
  if (only && statSync(only).isDirectory() && existsSync(join(only, "manifest.json"))) return only;
  throw refuse(file, "no manifest.json at its top or in its one top directory");
}

export async function importImage(opts: ImportOptions): Promise<Manifest> {
  const { home, file } = opts;
  if (!existsSync(file) || !statSync(file).isFile())
    throw new HutchError("not_found", `no file ${file}`, "name a .tar of an image directory: hutch image import FILE");
  if (opts.name !== undefined) checkImageName(opts.name);
  return withStaging(imagesDir(home), "import", `hutch image import ${file}`, async (staging) => {
    const unpacked = join(staging, "unpacked");
    mkdirSync(unpacked);
    const unpacker = createUnpacker(unpacked, { maxEntries: 100 });
    try {
      for await (const chunk of Bun.file(file).stream()) await unpacker.write(chunk);
      await unpacker.end();
    } catch (err) {
      await unpacker.abort();
      if (err instanceof TarError) throw refuse(file, err.message);
      throw err;
    }
    const root = imageRoot(unpacked, file);
    const extra = readdirSync(root).filter((f) => f !== "manifest.json" && !(IMAGE_FILES as readonly string[]).includes(f));
    if (extra.length > 0) throw refuse(file, `unexpected files ${extra.join(", ")}`);
    let raw: unknown;
    try {
      raw = await Bun.file(join(root, "manifest.json")).json();
    } catch (err) {
      throw refuse(file, `manifest.json is not JSON (${(err as Error).message})`);
    }
    const manifest = validateManifest(raw, file);
    await verifyFiles(root, manifest, file, "the archive is damaged or was changed after it was made: copy or make it again");
    const name = opts.name ?? manifest.name;
    if (existsSync(imagePaths(home, name).dir) && !opts.force) {
      throw new HutchError(
        "conflict",
        `image "${name}" exists`,
        `replace it: hutch image import ${file} --force, or pick another name: --name NAME`,
      );
    }
    const installed: Manifest = { ...manifest, name };
    if (name !== manifest.name) await Bun.write(join(root, "manifest.json"), `${JSON.stringify(installed, null, 2)}\n`);
    installImage(home, name, root, staging, overlayUsers(home));
    return installed;
  });
}
