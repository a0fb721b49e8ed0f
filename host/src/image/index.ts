// Images: the kernel, initramfs and root disk a QEMU box boots (image/BOOT.md).
export {
  DEFAULT_IMAGE,
  buildWithFiles,
  checkImageName,
  collectBuilds,
  imageFiles,
  imageVerifier,
  imagePaths,
  imagesDir,
  listImages,
  loadImage,
  movedBuild,
  overlayBacking,
  overlayUsers,
  removeImage,
  verifyFiles,
  type ImagePaths,
  type ImageUsers,
} from "./store.ts";
export { BUILD_STEPS, buildImage, type BuildOptions, type BuildResult } from "./build.ts";
export { beginImport, qcow2Problem, type ImportOptions, type PendingImport } from "./import.ts";
export { ImageImports } from "./uploads.ts";
export { ensureGuestDisk } from "./guest-disk.ts";
export { validateManifest, type Manifest } from "./manifest.ts";
