// Importing an image archive: a .tar of an image directory (made with e.g.
// `tar -C ~/.local/share/hutch/images -chf default.tar default`; -h, since a
// name is a symlink into the store). The archive arrives in chunks (an upload
// through the daemon) and is unpacked as it comes with the safe tar reader
// into staging beside the images, bounded in entries and bytes; nothing in it
// is ever run. At the end every file is checked against the manifest and the
// root disk must be a qcow2 that stands alone (no backing file, no external
// data file: either would let a box read a file of the server's). Only then
// is it renamed into place; anything else is refused and the staging removed,
// so nothing half-written reaches the store.
import { existsSync, mkdirSync, openSync, readSync, closeSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { HutchError, IMAGE_LIMITS, TarError, type OpReport } from "@hutch/shared";
import { createUnpacker } from "@hutch/shared/node";
import { IMAGE_FILES, validateManifest, type Manifest } from "./manifest.ts";
import { makeStaging, removeTree, sweepStale } from "./staging.ts";
import { checkImageName, imagePaths, imagesDir, installImage, verifyFiles, type ImageUsers } from "./store.ts";

export interface ImportOptions {
  home: string;
  /** How messages name the archive (its file name, as the person gave it). */
  source: string;
  /** Install under this name instead of the manifest's. */
  name?: string;
  force: boolean;
  /** Which boxes back onto each build (store.ts overlayUsers); none when absent. */
  users?: ImageUsers;
}

/** An import under way: its archive written in order, then finished or aborted; its staging is gone either way. */
export interface PendingImport {
  /** Unpacks the next bytes of the archive; a malformed archive is refused (and the import dropped). */
  write(chunk: Uint8Array): Promise<void>;
  /** Ends the archive, checks every file, installs it under its name; the manifest as installed. */
  finish(report?: OpReport): Promise<Manifest>;
  /** Drops it and its staging. Idempotent. */
  abort(): Promise<void>;
}

const refuse = (source: string, why: string) =>
  new HutchError(
    "invalid",
    `${source} is not a hutch image archive: ${why}`,
    "make one from an image directory: tar -C $HUTCH_HOME/images -chf NAME.tar NAME",
  );

/** The directory holding manifest.json: the archive's top level, or its one top directory. */
function imageRoot(unpacked: string, source: string): string {
  if (existsSync(join(unpacked, "manifest.json"))) return unpacked;
  const tops = readdirSync(unpacked);
  const only = tops.length === 1 ? join(unpacked, tops[0]!) : undefined;
  if (only && statSync(only).isDirectory() && existsSync(join(only, "manifest.json"))) return only;
  throw refuse(source, "no manifest.json at its top or in its one top directory");
}

function refuseExisting(home: string, name: string, force: boolean, source: string): void {
  if (!force && existsSync(imagePaths(home, name).dir))
    throw new HutchError(
      "conflict",
      `image "${name}" exists`,
      `replace it: hutch image import ${source} --force, or pick another name: --name NAME`,
    );
}

const QCOW2_MAGIC = 0x514649fb;
/** Incompatible feature bit 2 of a version 3 header: the guest data lives in another file. */
const QCOW2_EXTERNAL_DATA = 4n;

/**
 * Why root.qcow2 is not a disk a box may boot on, or null: it must be a
 * qcow2 (version 2 or 3) naming no other file, read from its header only.
 */
export function qcow2Problem(header: Uint8Array): string | null {
  if (header.byteLength < 104) return "root.qcow2 is too short to be a qcow2 image";
  const v = new DataView(header.buffer, header.byteOffset, header.byteLength);
  if (v.getUint32(0) !== QCOW2_MAGIC) return "root.qcow2 is not a qcow2 image";
  const version = v.getUint32(4);
  if (version !== 2 && version !== 3) return `root.qcow2 is qcow2 version ${version}; hutch takes versions 2 and 3`;
  if (v.getBigUint64(8) !== 0n) return "root.qcow2 names a backing file; an image's root disk must stand alone";
  if (version === 3 && (v.getBigUint64(72) & QCOW2_EXTERNAL_DATA) !== 0n)
    return "root.qcow2 keeps its data in an external file; an image's root disk must stand alone";
  return null;
}

function readHeader(path: string): Uint8Array {
  const fd = openSync(path, "r");
  try {
    const buf = new Uint8Array(104);
    return buf.subarray(0, readSync(fd, buf, 0, buf.byteLength, 0));
  } finally {
    closeSync(fd);
  }
}

export function beginImport(opts: ImportOptions): PendingImport {
  const { home, source } = opts;
  if (opts.name !== undefined) {
    checkImageName(opts.name);
    refuseExisting(home, opts.name, opts.force, source);
  }
  // What an import or build killed with its process left (the pid in the name is gone).
  sweepStale(imagesDir(home));
  const staging = makeStaging(imagesDir(home), "import");
  const unpacked = join(staging, "unpacked");
  mkdirSync(unpacked);
  const unpacker = createUnpacker(unpacked, { maxEntries: 100, maxBytes: IMAGE_LIMITS.archiveBytes });
  let open = true;
  const drop = async () => {
    if (!open) return;
    open = false;
    await unpacker.abort().catch(() => undefined);
    removeTree(staging);
  };
  const failed = async (err: unknown): Promise<never> => {
    await drop();
    throw err instanceof TarError ? refuse(source, err.message) : err;
  };
  return {
    async write(chunk) {
      if (!open) throw new HutchError("conflict", `the import of ${source} was dropped`, "import it again");
      await unpacker.write(chunk).catch(failed);
    },
    async finish(report = () => {}) {
      if (!open) throw new HutchError("conflict", `the import of ${source} was dropped`, "import it again");
      try {
        await unpacker.end().catch((err) => {
          throw err instanceof TarError ? refuse(source, err.message) : err;
        });
        report({ type: "step", n: 1, total: 2, title: "verifying" });
        const root = imageRoot(unpacked, source);
        const extra = readdirSync(root).filter((f) => f !== "manifest.json" && !(IMAGE_FILES as readonly string[]).includes(f));
        if (extra.length > 0) throw refuse(source, `unexpected files ${extra.join(", ")}`);
        let raw: unknown;
        try {
          raw = await Bun.file(join(root, "manifest.json")).json();
        } catch (err) {
          throw refuse(source, `manifest.json is not JSON (${(err as Error).message})`);
        }
        const manifest = validateManifest(raw, source);
        const hint = "the archive is damaged or was changed after it was made: copy or make it again";
        await verifyFiles(root, manifest, source, hint, report);
        const problem = qcow2Problem(readHeader(join(root, "root.qcow2")));
        if (problem) throw refuse(source, problem);
        const name = opts.name ?? manifest.name;
        refuseExisting(home, name, opts.force, source);
        report({ type: "step", n: 2, total: 2, title: "installing" });
        const installed: Manifest = { ...manifest, name };
        if (name !== manifest.name) await Bun.write(join(root, "manifest.json"), `${JSON.stringify(installed, null, 2)}\n`);
        installImage(home, name, root, staging, opts.users);
        return installed;
      } finally {
        await drop();
      }
    },
    abort: drop,
  };
}
