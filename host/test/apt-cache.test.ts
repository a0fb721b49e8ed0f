// apt queries (an image's up-to-date check) keep apt's binary caches in
// hutch's cache directory: on a machine whose apt keeps none (Debian's
// container images set Dir::Cache::pkgcache to ""), each query would parse
// every package list again. Real apt-cache against this machine's lists.
import { expect, test } from "bun:test";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { env } from "../src/env.ts";
import { candidateVersions, kernelPackage } from "../src/image/apt.ts";

const cache = join(env.cacheDir(), "apt", "pkgcache.bin");

test("a query answers from apt's lists and leaves a cache for the next one", async () => {
  const versions = await candidateVersions(["bash", "coreutils"]);
  expect(versions.get("bash")).toMatch(/^\d/);
  expect(versions.get("coreutils")).toMatch(/^\d/);
  expect(await kernelPackage()).toMatch(/^linux-image-\d/);
  expect(existsSync(cache)).toBe(true);
  expect(statSync(cache).size).toBeGreaterThan(1024 * 1024);
});

test("an unknown package is still named, with the cache in use", async () => {
  await expect(candidateVersions(["bash", "no-such-package-hutch"])).rejects.toThrow("apt has no package no-such-package-hutch");
});
