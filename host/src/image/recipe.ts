// The recipe of an image: everything that decides its content. Two builds with
// the same recipe hash make the same image, so a build that finds one skips.
import { createHash } from "node:crypto";

/** Bump when the build steps change in a way the fields below do not show. */
export const RECIPE_FORMAT = 3; // 2: module signatures stripped; 3: upgraded from the suite's updates and security updates

export interface Recipe {
  format: number;
  suite: string;
  /**
   * Each suite of the root disk and when the host's package lists say it was
   * last published ("bookworm-security Sun, 29 Nov 2026 00:53:13 UTC"): a
   * newer security release makes a new recipe, so `hutch image build` rebuilds.
   */
  updates: readonly string[];
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
    updates: [...r.updates],
    packages: [...r.packages].sort(),
    kernel: r.kernel,
    busybox: r.busybox,
    modules: [...r.modules],
    init: r.init,
  };
  return createHash("sha256").update(JSON.stringify(canonical)).digest("hex");
}
