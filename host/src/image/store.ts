// Installed images. Each build is immutable and lives in a store of its own,
// $HUTCH_HOME/images/.store/<recipe hash, 12 hex>-<build id>/ (vmlinuz,
// initramfs.img, root.qcow2, manifest.json); a name, images/<name>, is a
// symlink to one of them. A box's qcow2 overlay has the build's root.qcow2 as
// its backing file, and the engine boots the kernel and initramfs beside that
// backing file, so rebuilding or removing a name never changes what an
// existing box boots. A build no name points at and no box's overlay backs
// onto is removed; `image rm` of a name a box uses is refused with the boxes.
// An image installed by copying a directory to images/<name> (older homes,
// tests) still works; when a build replaces it while boxes use it, it moves
// into the store and says where it came from (moved-from), so those boxes
// find it at their next start.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { spawnSync } from "node:child_process";
import { HutchError, type ImageEntry, type OpReport } from "@hutch/shared";
import { IMAGE_FILES, sha256File, validateManifest, type Manifest } from "./manifest.ts";
import { STAGING_PREFIX, makeStaging, removeTree } from "./staging.ts";
import { dropTrees } from "./tree-cache.ts";

/** Where builds live, under the images directory. */
export const STORE = ".store";
/** In a build moved into the store from a plain images/<name> directory: the directory it was. */
export const MOVED_FROM = "moved-from";

export const DEFAULT_IMAGE = "default";
const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

export function checkImageName(name: string): void {
  if (!NAME.test(name))
    throw new HutchError(
      "invalid",
      `bad image name ${JSON.stringify(name)}: use lowercase letters, digits and dashes`,
      "e.g. hutch image build --name default",
    );
}

export const imagesDir = (home: string): string => join(home, "images");

/** The files of an image directory (a build in the store, or what a name points at). */
export function imageFiles(dir: string) {
  return {
    dir,
    kernel: join(dir, "vmlinuz"),
    initramfs: join(dir, "initramfs.img"),
    root: join(dir, "root.qcow2"),
    manifest: join(dir, "manifest.json"),
  };
}

/** A name's files, resolved to the build it points at now (the name's own path when it points nowhere yet). */
export function imagePaths(home: string, name: string) {
  checkImageName(name);
  const link = join(imagesDir(home), name);
  let dir = link;
  try {
    dir = realpathSync(link);
  } catch {
    // not there: callers say "no image"
  }
  return imageFiles(dir);
}
export type ImagePaths = ReturnType<typeof imagePaths>;

/**
 * The manifest of an installed image, checked against the files beside it by
 * size (hashing a root disk on every boot would cost seconds; import and
 * `hutch image verify` hash every file).
 */
export function loadImage(home: string, name: string): Manifest {
  const p = imagePaths(home, name);
  if (!existsSync(p.manifest))
    throw new HutchError(
      "not_found",
      `no image "${name}"`,
      `build it: hutch image build${name === DEFAULT_IMAGE ? "" : ` --name ${name}`}`,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(p.manifest, "utf8"));
  } catch (err) {
    throw new HutchError(
      "invalid",
      `image "${name}": manifest.json is not JSON (${(err as Error).message})`,
      `rebuild it: hutch image build --name ${name} --force`,
    );
  }
  const m = validateManifest(raw, `image "${name}"`);
  for (const f of IMAGE_FILES) {
    const path = join(p.dir, f);
    const size = existsSync(path) ? statSync(path).size : -1;
    if (size !== m.files[f].bytes) {
      throw new HutchError(
        "invalid",
        `image "${name}": ${f} is ${size < 0 ? "missing" : `${size} bytes, the manifest says ${m.files[f].bytes}`}`,
        `rebuild it: hutch image build --name ${name} --force`,
      );
    }
  }
  return m;
}

/** Every image directory, usable or not (a broken one is listed with its problem, so it can be removed). */
export function listImages(home: string): ImageEntry[] {
  const dir = imagesDir(home);
  if (!existsSync(dir)) return [];
  const names = readdirSync(dir)
    .filter((n) => !n.startsWith(".") && NAME.test(n))
    .sort();
  // A name whose build is gone (a dangling link) is listed with that problem, so it can be removed.
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

/** Which boxes' overlays back onto each build: realpath of a build directory -> box ids. */
export type ImageUsers = (buildDir: string) => string[];

/**
 * Removes a name. Refused while a user's box's overlay backs onto its build
 * (naming the boxes and the command that frees it); the server's own boxes
 * (`own`: a warm pool's, or one booted for a booted state) do not hold it:
 * they are thrown away as stale by their pool. The build itself goes with
 * the name unless another name points at it or a box still backs onto it.
 */
export function removeImage(
  home: string,
  name: string,
  users: ImageUsers,
  describe: (ids: string[]) => string = (ids) => ids.join(", "),
  own: (id: string) => boolean = () => false,
): void {
  checkImageName(name);
  const link = join(imagesDir(home), name);
  if (!lexists(link)) throw new HutchError("not_found", `no image "${name}"`, "see the images there are: hutch image list");
  const target = resolved(link);
  const using = target ? users(target).filter((id) => !own(id)) : [];
  if (using.length > 0) {
    throw new HutchError(
      "conflict",
      `image "${name}" is used by ${using.length === 1 ? "box" : "boxes"} ${describe(using)}: their disks are built on it`,
      `delete them first (hutch box delete ${describe(using).replaceAll(",", "")}), or keep the image`,
    );
  }
  if (lstatSync(link).isSymbolicLink()) rmSync(link);
  else {
    // An image installed as a plain directory (older homes): renamed aside first, so it never half-exists.
    const trash = makeStaging(imagesDir(home), `rm-${name}`);
    renameSync(link, join(trash, name));
    removeTree(trash);
  }
  collectBuilds(home, users);
}

/**
 * Installs the finished image directory `ready` as a new build and points
 * `name` at it, in one rename. What the name pointed at before stays for the
 * boxes built on it and goes once none is.
 */
export function installImage(home: string, name: string, ready: string, scratch: string, users: ImageUsers = () => []): string {
  checkImageName(name);
  const m = validateManifest(JSON.parse(readFileSync(join(ready, "manifest.json"), "utf8")), `the new image "${name}"`);
  const store = join(imagesDir(home), STORE);
  mkdirSync(store, { recursive: true, mode: 0o700 });
  const build = join(store, `${m.recipeHash.slice(0, 12)}-${crypto.randomUUID().slice(0, 8)}`);
  renameSync(ready, build);
  const link = join(imagesDir(home), name);
  if (lexists(link) && !lstatSync(link).isSymbolicLink()) retireDirectory(home, link, scratch, users);
  const tmp = join(imagesDir(home), `${STAGING_PREFIX}link-${name}-${process.pid}`);
  rmSync(tmp, { force: true });
  symlinkSync(join(STORE, build.slice(store.length + 1)), tmp);
  renameSync(tmp, link);
  collectBuilds(home, users);
  return build;
}

/** A plain images/<name> directory being replaced: into the store when boxes use it (remembering where it was), else away. */
function retireDirectory(home: string, dir: string, scratch: string, users: ImageUsers): void {
  if (users(realpathSync(dir)).length === 0) {
    renameSync(dir, join(scratch, "replaced"));
    return;
  }
  const moved = join(imagesDir(home), STORE, `moved-${dir.slice(dir.lastIndexOf("/") + 1)}-${crypto.randomUUID().slice(0, 8)}`);
  renameSync(dir, moved);
  writeFileSync(join(moved, MOVED_FROM), `${dir}\n`, { mode: 0o600 });
}

/** Removes the builds no name points at and no box's overlay backs onto. */
export function collectBuilds(home: string, users: ImageUsers): void {
  const store = join(imagesDir(home), STORE);
  const named = new Set<string>();
  for (const n of existsSync(imagesDir(home)) ? readdirSync(imagesDir(home)) : []) {
    if (n.startsWith(".")) continue;
    const t = resolved(join(imagesDir(home), n));
    if (t) named.add(t);
  }
  // The tree kept for the next build (tree-cache.ts) goes with the last image.
  if (named.size === 0) dropTrees(imagesDir(home));
  if (!existsSync(store)) return;
  for (const b of readdirSync(store)) {
    const dir = join(store, b);
    if (named.has(dir) || users(dir).length > 0) continue;
    // A moved build's boxes still name where it was, until their next start points them here.
    const from = movedFrom(dir);
    if (from && users(from).length > 0) continue;
    removeTree(dir);
  }
}

/**
 * Where a build moved to when its plain directory was replaced (moved-from
 * names it), for an overlay whose backing file is gone; null if none did.
 */
export function movedBuild(home: string, oldDir: string): string | null {
  const store = join(imagesDir(home), STORE);
  if (!existsSync(store)) return null;
  for (const b of readdirSync(store)) if (movedFrom(join(store, b)) === oldDir) return join(store, b);
  return null;
}

function movedFrom(build: string): string | null {
  try {
    return readFileSync(join(build, MOVED_FROM), "utf8").trim();
  } catch {
    return null;
  }
}

/** The backing file a qcow2 overlay names (read with -U: a running VM holds its lock), or null. */
export function overlayBacking(disk: string): string | null {
  const r = spawnSync("qemu-img", ["info", "-U", "--output=json", disk], { encoding: "utf8" });
  if (r.status !== 0) return null;
  try {
    const info = JSON.parse(r.stdout) as { "full-backing-filename"?: string; "backing-filename"?: string };
    return info["full-backing-filename"] ?? info["backing-filename"] ?? null;
  } catch {
    return null;
  }
}

/**
 * The boxes whose overlay (boxes/<id>/disk.qcow2) backs onto each build, read
 * from the overlays themselves once per call: the overlay is what a box boots
 * from, so it is the truth, whatever the database says.
 */
export function overlayUsers(home: string): ImageUsers {
  const byDir = new Map<string, string[]>();
  const boxes = join(home, "boxes");
  for (const id of existsSync(boxes) ? readdirSync(boxes) : []) {
    const disk = join(boxes, id, "disk.qcow2");
    if (!existsSync(disk)) continue;
    const backing = overlayBacking(disk);
    if (!backing) continue;
    const dir = resolved(dirname(backing)) ?? dirname(backing);
    byDir.set(dir, [...(byDir.get(dir) ?? []), id]);
  }
  return (dir) => byDir.get(dir) ?? [];
}

function lexists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

function resolved(p: string): string | null {
  try {
    return realpathSync(p);
  } catch {
    return null;
  }
}

/** For display: what a name points at, relative to the images directory. */
export function pointerOf(home: string, name: string): string | null {
  try {
    return readlinkSync(join(imagesDir(home), name));
  } catch {
    return null;
  }
}

/** How often hashing reports its counts. */
const COUNTS_EVERY_MS = 250;

/**
 * Checks every file's sha256 against the manifest of the image directory
 * `dir`; throws naming the first mismatch. Reports its counts as it hashes
 * (a root disk is hundreds of MiB).
 */
export async function verifyFiles(dir: string, m: Manifest, what: string, hint: string, report: OpReport = () => {}): Promise<void> {
  const bytesTotal = IMAGE_FILES.reduce((n, f) => n + m.files[f].bytes, 0);
  const t0 = performance.now();
  let bytes = 0;
  let files = 0;
  let last = t0;
  const counts = () => {
    const elapsedMs = Math.round(performance.now() - t0);
    const rate = elapsedMs > 0 ? Math.round((bytes * 1000) / elapsedMs) : 0;
    report({ type: "counts", phase: "verify", files, filesTotal: IMAGE_FILES.length, bytes, bytesTotal, rate, elapsedMs });
  };
  for (const f of IMAGE_FILES) {
    const path = join(dir, f);
    if (!existsSync(path)) throw new HutchError("invalid", `${what}: ${f} is missing`, hint);
    const sum = await sha256File(path, (n) => {
      bytes += n;
      if (performance.now() - last < COUNTS_EVERY_MS) return;
      last = performance.now();
      counts();
    });
    if (sum !== m.files[f].sha256)
      throw new HutchError("invalid", `${what}: ${f} has sha256 ${sum}, the manifest says ${m.files[f].sha256}`, hint);
    files += 1;
  }
  counts();
}

/**
 * `hutch image verify`: the named image's manifest read and its files' sizes
 * checked now (a missing or broken image is refused before any answer), then
 * the returned work hashes every file.
 */
export function imageVerifier(home: string, name: string): (report: OpReport) => Promise<{ name: string; ok: true }> {
  const m = loadImage(home, name);
  const dir = imagePaths(home, name).dir;
  return async (report) => {
    await verifyFiles(dir, m, `image "${name}"`, `rebuild it: sudo hutch image build --name ${name} --force`, report);
    return { name, ok: true };
  };
}

/**
 * The build whose files have these sha256s (its manifest's, sizes checked),
 * looked for first where `name` points, then among every build and named
 * directory of the home; null when the home has none. A box carried in from
 * another home (fleet/carry.ts) needs the very build its disk was made on.
 */
export function buildWithFiles(home: string, name: string, sha256: Record<(typeof IMAGE_FILES)[number], string>): string | null {
  const dir = imagesDir(home);
  const candidates = [
    resolved(join(dir, name)),
    ...(existsSync(join(dir, STORE)) ? readdirSync(join(dir, STORE)).map((b) => join(dir, STORE, b)) : []),
    ...(existsSync(dir)
      ? readdirSync(dir)
          .filter((n) => NAME.test(n))
          .map((n) => resolved(join(dir, n)))
      : []),
  ];
  for (const c of candidates) {
    if (!c) continue;
    try {
      const m = validateManifest(JSON.parse(readFileSync(join(c, "manifest.json"), "utf8")), c);
      if (IMAGE_FILES.every((f) => m.files[f].sha256 === sha256[f] && statSync(join(c, f)).size === m.files[f].bytes)) return c;
    } catch {
      // not a build, or a broken one: not this one
    }
  }
  return null;
}
