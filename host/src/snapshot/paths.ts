// Paths inside a snapshot, as callers give them ("src/app.ts"): checked like
// the tar unpacker checks entry names, and resolved through the trees without
// ever going through a symlink.
import { invalid } from "./errors.ts";
import type { SnapshotRecord, Store } from "./store.ts";
import type { TreeEntry } from "./tree.ts";

/** The components of a path inside a snapshot; refuses anything that could leave it. "" and "." are the root. */
export function snapshotPath(path: string): string[] {
  const shown = JSON.stringify(path);
  if (path.includes("\0")) throw invalid(`path ${shown} contains NUL`);
  if (path.startsWith("/")) throw invalid(`path ${shown} is absolute`, "give it relative to the snapshot's root (src/app.ts)");
  const parts = path.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes(".."))
    throw invalid(
      `path ${shown} has a ".." component, which would leave the snapshot`,
      "give it relative to the snapshot's root, without ..",
    );
  return parts;
}

export interface Resolved {
  /** The entry the path names; undefined for the root. */
  entry?: TreeEntry;
  /** The entries of the directory the path names (the root's for ""). */
  children?: TreeEntry[];
}

/** Follows `parts` from the snapshot's root; every component but the last must be a directory (a symlink is refused). */
export async function resolvePath(store: Store, snap: SnapshotRecord, parts: string[]): Promise<Resolved> {
  let children = await store.readTree(snap.tree, `snapshot ${snap.id}`);
  let entry: TreeEntry | undefined;
  for (let i = 0; i < parts.length; i++) {
    const here = parts.slice(0, i + 1).join("/");
    entry = children.find((e) => e.name === parts[i]);
    if (!entry) throw invalid(`${here} is not in snapshot ${snap.id}`, "browse the snapshot to see what it holds");
    if (i < parts.length - 1) {
      if (entry.type === "symlink")
        throw invalid(
          `${here} in snapshot ${snap.id} is a symlink; paths are not followed through links`,
          `name the link's target inside the snapshot instead of ${parts.join("/")}`,
        );
      if (entry.type !== "dir") throw invalid(`${here} in snapshot ${snap.id} is not a directory`);
    }
    if (entry.type === "dir") children = await store.readTree(entry.tree!, here);
  }
  return entry && entry.type !== "dir" ? { entry } : { entry, children };
}
