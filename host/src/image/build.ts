// `hutch image build`: the default image from Debian packages, offline apart
// from the host's apt mirror. Everything happens in a staging directory beside
// the target; the finished image is renamed into place in one step.
import { copyFileSync, mkdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { HUTCH_VERSION, HutchError } from "@hutch/shared";
import { candidateVersions, imageSources, kernelPackage, listDates } from "./apt.ts";
import { GiB, MiB, makeExt4, roundUp, toQcow2, treeBytes, virtualBytes } from "./disk.ts";
import { buildInitramfs, fetchBusybox, initScript } from "./initramfs.ts";
import { fetchKernel } from "./kernel.ts";
import { IMAGE_FILES, MANIFEST_FORMAT, sha256File, type Manifest } from "./manifest.ts";
import { WANTED_MODULES } from "./modules.ts";
import type { Progress } from "./progress.ts";
import { RECIPE_FORMAT, recipeHash, type Recipe } from "./recipe.ts";
import {
  PACKAGES,
  PROFILES,
  SUITE,
  addPackages,
  customize,
  debootstrap,
  installedPackages,
  profilePackages,
  upgrade,
  type Profile,
} from "./rootfs.ts";
import { sweepStale, withStaging } from "./staging.ts";
import { TREES, withBaseTree } from "./tree-cache.ts";
import { imagePaths, imagesDir, installImage, loadImage, overlayUsers } from "./store.ts";
import { TOOLS, ensureTools, isRoot } from "./tools.ts";

export interface BuildOptions {
  home: string;
  name: string;
  /** Rebuild even when an image with the same recipe exists. */
  force: boolean;
  /** Make the upgraded root filesystem again instead of copying the kept one (tree-cache.ts). */
  noCache?: boolean;
  /** The packages beyond the base (./rootfs.ts PROFILES); default base. */
  profile?: Profile;
  progress: Progress;
}

export interface BuildResult {
  manifest: Manifest;
  /** True when an up-to-date image was found and nothing was built. */
  cached: boolean;
}

/** Free space a box gets on its root disk beyond what the image holds (the disk is sparse: unused space costs nothing). */
const ROOT_HEADROOM = 2 * GiB;

export const BUILD_STEPS = 7;

async function resolveRecipe(profile: Profile): Promise<Recipe> {
  const kernel = await kernelPackage();
  const packages = profilePackages(profile);
  // The rootfs packages are looked up too so a missing one fails here, named, rather than minutes later inside debootstrap.
  const versions = await candidateVersions([kernel, "busybox-static", ...packages]);
  const kernelVersion = versions.get(kernel)!;
  const busybox = versions.get("busybox-static")!;
  return {
    format: RECIPE_FORMAT,
    suite: SUITE,
    updates: listDates(imageSources(SUITE)).map((s) => `${s.suite} ${s.date ?? "not in the host's lists"}`),
    packages,
    kernel: `${kernel}=${kernelVersion}`,
    busybox: `busybox-static=${busybox}`,
    modules: WANTED_MODULES,
    init: initScript,
  };
}

function upToDate(home: string, name: string, hash: string): Manifest | undefined {
  try {
    const m = loadImage(home, name);
    return m.recipeHash === hash ? m : undefined;
  } catch {
    return undefined;
  }
}

export async function buildImage(opts: BuildOptions): Promise<BuildResult> {
  const { home, name, progress: p } = opts;
  const paths = imagePaths(home, name);
  if (!isRoot()) {
    // The daemon builds images (they are for the boxes it runs), so it is the daemon that must be root.
    throw new HutchError(
      "denied",
      "building an image needs root, and the daemon does not run as root: debootstrap and chroot create root-owned files the root disk must keep",
      "build it with a root daemon (sudo hutch image build, in root's home) and bring it here: hutch image import FILE (image/README.md)",
    );
  }
  const t0 = performance.now();
  p.step("checking the build tools");
  await ensureTools(
    [
      TOOLS.aptGet,
      TOOLS.aptCache,
      TOOLS.dpkgDeb,
      TOOLS.dpkgQuery,
      TOOLS.depmod,
      TOOLS.debootstrap,
      TOOLS.chroot,
      TOOLS.du,
      TOOLS.mke2fs,
      TOOLS.qemuImg,
    ],
    "building an image",
    p.note,
  );

  p.step("resolving the recipe");
  const recipe = await resolveRecipe(opts.profile ?? "base");
  const hash = recipeHash(recipe);
  const [kernelPkg, kernelVersion] = recipe.kernel.split("=") as [string, string];
  p.detail(`${recipe.kernel}, recipe ${hash.slice(0, 12)}`);
  if (!opts.force && !opts.noCache) {
    const current = upToDate(home, name, hash);
    if (current) {
      p.done(`image "${name}" is up to date (recipe ${hash.slice(0, 12)}); nothing to do`);
      return { manifest: current, cached: true };
    }
  }

  // What an interrupted build left behind (SIGKILL lets nothing clean up) goes first.
  for (const left of sweepStale(imagesDir(home))) p.note(`removed ${left}, left by an interrupted build`);
  const again = `sudo hutch image build${name === "default" ? "" : ` --name ${name}`}${opts.force ? " --force" : ""}${opts.noCache ? " --no-cache" : ""}`;
  return withStaging(imagesDir(home), `build-${name}`, again, async (staging) => {
    const out = join(staging, "image");
    const work = join(staging, "work");
    mkdirSync(out);
    mkdirSync(work);

    p.step(`kernel ${kernelPkg}`);
    const kernel = await fetchKernel(work, kernelPkg, kernelVersion, p.detail);
    copyFileSync(kernel.vmlinuz, join(out, "vmlinuz"));

    p.step("initramfs");
    p.detail("busybox-static");
    const busybox = await fetchBusybox(work, recipe.busybox.slice("busybox-static=".length));
    p.detail(`${kernel.modules.length} modules, /init`);
    await Bun.write(join(out, "initramfs.img"), buildInitramfs(busybox, kernel.modules));

    p.step(`root filesystem (debootstrap ${SUITE} minbase)`);
    const sources = imageSources(SUITE);
    const mirror = sources[0]!.uri;
    const rootfs = join(work, "rootfs");
    const tree = await withBaseTree(
      imagesDir(home),
      { suite: SUITE, packages: PACKAGES, sources, updates: recipe.updates },
      rootfs,
      opts.noCache ?? false,
      async () => {
        await debootstrap(rootfs, mirror, p.detail);
        p.detail(
          `updates: ${sources
            .slice(1)
            .map((s) => s.suite)
            .join(", ")}`,
        );
        return upgrade(rootfs, sources, p.detail);
      },
      p.note,
    );
    const updates = tree.upgrade;
    // A note, not a detail: a log prints one detail per 5 s, and this says why the packages are as old as that tree.
    if (tree.reused)
      p.note(`copied the upgraded tree an earlier build kept (${TREES}/${tree.kept}): no debootstrap (--no-cache makes it again)`);
    for (const s of updates.sources)
      if (!s.date)
        p.note(
          `${s.suite} could not be read from ${s.uri}: the image has no updates from it (the manifest says so); rebuild when the mirror is reachable`,
        );
    p.detail(`${updates.upgraded.length} packages upgraded`);
    const extra = PROFILES[opts.profile ?? "base"];
    if (extra.length > 0) {
      p.detail(`profile ${opts.profile}: ${extra.join(", ")}`);
      await addPackages(rootfs, extra, p.detail);
    }
    p.detail("user hutch, /workspace, /.hutch, cleaning apt caches");
    await customize(rootfs);
    const packages = await installedPackages(rootfs);

    p.step("root disk (mke2fs -d, qcow2)");
    const contentBytes = await treeBytes(rootfs);
    const raw = join(work, "root.raw");
    const bytes = roundUp(contentBytes + ROOT_HEADROOM, 64 * MiB);
    p.detail(`ext4 of ${(bytes / GiB).toFixed(2)} GiB holding ${(contentBytes / MiB).toFixed(0)} MiB`);
    await makeExt4(rootfs, raw, { label: "hutch-root", bytes, journal: true });
    rmSync(rootfs, { recursive: true, force: true });
    p.detail("converting to qcow2");
    await toQcow2(raw, join(out, "root.qcow2"));
    rmSync(raw);

    p.step("manifest");
    const files = {} as Manifest["files"];
    for (const f of IMAGE_FILES) {
      p.detail(`sha256 ${f}`);
      files[f] = { bytes: statSync(join(out, f)).size, sha256: await sha256File(join(out, f)) };
    }
    const manifest: Manifest = {
      format: MANIFEST_FORMAT,
      name,
      hutchVersion: HUTCH_VERSION,
      builtAt: new Date().toISOString(),
      buildSeconds: Math.round((performance.now() - t0) / 100) / 10,
      recipeHash: hash,
      kernel: { package: kernelPkg, version: kernelVersion, release: kernel.release },
      busybox: recipe.busybox,
      modules: kernel.modules.map((m) => m.file),
      suite: SUITE,
      mirror,
      sources: updates.sources,
      upgraded: updates.upgraded,
      packages,
      root: { contentBytes, virtualBytes: await virtualBytes(join(out, "root.qcow2")) },
      files,
    };
    await Bun.write(join(out, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);

    installImage(home, name, out, staging, overlayUsers(home));
    p.done(`built image "${name}" in ${paths.dir}`);
    return { manifest, cached: false };
  });
}
