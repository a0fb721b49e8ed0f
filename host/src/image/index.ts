// Images: the kernel, initramfs and root disk a QEMU box boots (image/BOOT.md).
export {
  DEFAULT_IMAGE,
  checkImageName,
  collectBuilds,
  imageFiles,
  imagePaths,
  imagesDir,
  listImages,
  loadImage,
  movedBuild,
  overlayBacking,
  overlayUsers,
  removeImage,
  verifyFiles,
  type ImageEntry,
  type ImagePaths,
  type ImageUsers,
} from "./store.ts";
export { BUILD_STEPS, buildImage, type BuildOptions, type BuildResult } from "./build.ts";
export { importImage } from "./import.ts";
export { ensureGuestDisk } from "./guest-disk.ts";
export { validateManifest, type Manifest } from "./manifest.ts";
