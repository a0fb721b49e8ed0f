// The recipe of an image: everything that decides its content. Two builds with
// the same recipe hash make the same image, so a build that finds one skips.
import { createHash } from "node:crypto";

/** Bump when the build steps change in a way the fields below do not show. */
export const RECIPE_FORMAT = 2; // 2: module signatures stripped

export interface Recipe {
  format: number;
  suite: string;
  packages: readonly string[];
  /** "linux-image-6.1.0-57-amd64=6.1.192-3" */
  kernel: string;
  /** "busybox-static=1:1.35.0-4+b3" */
  busybox: string;
  modules: readonly string[];
  init: string;
}

/** Key order and package order do not change the hash; the content of every field does. */
export function recipeHash(r: Recipe): string {
  const canonical = {
    format: r.format,
    suite: r.suite,
    packages: [...r.packages].sort(),
    kernel: r.kernel,
    busybox: r.busybox,
    modules: [...r.modules],
    init: r.init,
  };
  return createHash("sha256").update(JSON.stringify(canonical)).digest("hex");
}
