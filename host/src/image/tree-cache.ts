// The upgraded root filesystem every profile starts from (debootstrap minbase
// and the suite's updates), kept once per home: a build of another profile
// with the same start (`desktop` after `default`) copies it instead of running
// debootstrap and the upgrade again, two of its three minutes here. Like a
// Docker layer, it is found by what made it (TreeKey), never by age; one is
// kept, the newest, and none once the home has no image left.
//
// Builds of two names may run at once (and `image rm` beside them), so a
// kept tree can go while a build copies it: that build makes its own tree
// instead, and a tree of the same key made meanwhile by another build is left
// in place (the same key is the same tree), never replaced under a reader.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SuiteSource } from "./apt.ts";
import type { Upgrade } from "./rootfs.ts";
import { makeStaging, removeTree, STAGING_PREFIX, sweepStale } from "./staging.ts";
import { run, TOOLS } from "./tools.ts";

/** Bump when the steps that make the tree change in a way TreeKey does not show. */
const TREE_FORMAT = 1;
export const TREES = ".trees";

/** Everything that decides the tree's content. */
export interface TreeKey {
  suite: string;
  /** debootstrap's --include */
  packages: readonly string[];
  /** the suites the upgrade reads, each from where */
  sources: readonly SuiteSource[];
  /** each suite with its lists' publication date (the recipe's `updates`): newer updates make a new tree */
  updates: readonly string[];
}

export function treeHash(k: TreeKey): string {
  const canonical = {
    format: TREE_FORMAT,
    suite: k.suite,
    packages: [...k.packages].sort(),
    sources: k.sources.map((s) => `${s.uri} ${s.suite}`),
    updates: [...k.updates],
  };
  return createHash("sha256").update(JSON.stringify(canonical)).digest("hex");
}

export const treesDir = (imagesDir: string): string => join(imagesDir, TREES);

/** What a kept tree carries beside its files: the upgrade that made it, for the manifest. */
const UPGRADE_FILE = "upgrade.json";

function readUpgrade(entry: string): Upgrade | null {
  try {
    const u = JSON.parse(readFileSync(join(entry, UPGRADE_FILE), "utf8")) as Upgrade;
    if (!Array.isArray(u.sources) || !Array.isArray(u.upgraded) || !existsSync(join(entry, "root", "etc", "apt"))) return null;
    return u;
  } catch {
    return null;
  }
}

/** `cp -a`: owners, modes, setuid bits, links and device nodes as they are (the root disk keeps them). */
const copyTree = async (from: string, to: string): Promise<void> => {
  await run([TOOLS.cp.bin, "-a", "--reflink=auto", from, to]);
};

export interface TreeUse {
  upgrade: Upgrade;
  /** True when the kept tree was copied and nothing was made. */
  reused: boolean;
  /** The kept tree's name under TREES. */
  kept: string;
}

/**
 * Fills `rootfs` (not there yet) with the tree of `key`: a copy of the kept
 * one when it matches and `fresh` is false, else what `make` builds there,
 * which is then kept in place of any other. Keeping it is a convenience: a
 * failure to is noted and the build goes on.
 */
export async function withBaseTree(
  imagesDir: string,
  key: TreeKey,
  rootfs: string,
  fresh: boolean,
  make: () => Promise<Upgrade>,
  note: (text: string) => void,
  copy: (from: string, to: string) => Promise<void> = copyTree,
): Promise<TreeUse> {
  const dir = treesDir(imagesDir);
  const hash = treeHash(key).slice(0, 16);
  const entry = join(dir, hash);
  for (const left of sweepStale(dir)) note(`removed ${TREES}/${left}, left by an interrupted build`);
  const kept = fresh ? null : readUpgrade(entry);
  if (kept) {
    try {
      await copy(join(entry, "root"), rootfs);
      return { upgrade: kept, reused: true, kept: hash };
    } catch (err) {
      // Removed while it was copied (another build kept a newer tree, or the home's last image went).
      note(`the kept tree could not be copied (${firstLine(err)}); making it again`);
      removeTree(rootfs);
    }
  }
  const upgrade = await make();
  let staging: string | undefined;
  try {
    staging = makeStaging(dir, "tree");
    await copy(rootfs, join(staging, "root"));
    writeFileSync(join(staging, UPGRADE_FILE), JSON.stringify(upgrade));
    // Another build made the same tree meanwhile: that one stays, as a build may be copying it
    // (--no-cache replaces it: its point is a newer tree; a build copying the old one then makes its own).
    if (!fresh && readUpgrade(entry)) return { upgrade, reused: false, kept: hash };
    // What is there has no whole record, so no build copies it.
    if (existsSync(entry)) removeTree(entry);
    renameSync(staging, entry);
    staging = undefined;
    dropTrees(imagesDir, hash);
  } catch (err) {
    note(`the upgraded root filesystem was not kept for the next build (${firstLine(err)})`);
  } finally {
    if (staging) removeTree(staging);
  }
  return { upgrade, reused: false, kept: hash };
}

const firstLine = (err: unknown) => (err instanceof Error ? err.message.split("\n")[0] : String(err));

/** Removes the kept trees but `keep` (all of them without it), leaving a running build's staging alone. */
export function dropTrees(imagesDir: string, keep?: string): void {
  const dir = treesDir(imagesDir);
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) if (name !== keep && !name.startsWith(STAGING_PREFIX)) removeTree(join(dir, name));
}
