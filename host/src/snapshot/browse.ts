// Reading a snapshot without restoring it: list a directory, or compare two
// snapshots. A diff walks both trees at once and skips every directory whose
// tree id is the same in both, so comparing two snapshots of a big, mostly
// unchanged workspace reads only the directories on the changed paths.
import type { BrowseEntry, SnapshotBrowse, SnapshotChange } from "@hutch/shared";
import { snapshotPath, resolvePath } from "./paths.ts";
import type { Store } from "./store.ts";
import type { TreeEntry } from "./tree.ts";

function shown(e: TreeEntry): BrowseEntry {
  const b: BrowseEntry = { name: e.name, type: e.type, mode: e.mode, mtime: e.mtime };
  if (e.type === "file") b.size = e.size;
  if (e.type === "symlink") b.target = e.target;
  return b;
}

/** The entries of the directory at `path` in a snapshot ("" for its root), or the one entry a file or link path names. */
export async function browse(store: Store, snapshotRef: string, path = ""): Promise<SnapshotBrowse> {
  await store.syncIndex();
  const snap = await store.getSnapshot(snapshotRef);
  const parts = snapshotPath(path);
  const r = await resolvePath(store, snap, parts);
  const entries = r.children ? r.children.map(shown) : [shown(r.entry!)];
  return { snapshot: snap.id, path: parts.join("/"), entries };
}

/** A path that differs, as the diff route answers it before patches are added. */
export type Change = Pick<SnapshotChange, "path" | "change" | "type">;

function sameMeta(a: TreeEntry, b: TreeEntry): boolean {
  return (
    a.mode === b.mode &&
    a.mtime === b.mtime &&
    a.uid === b.uid &&
    a.gid === b.gid &&
    JSON.stringify(a.xattrs ?? []) === JSON.stringify(b.xattrs ?? [])
  );
}

function sameContent(a: TreeEntry, b: TreeEntry): boolean {
  if (a.type === "symlink") return a.target === b.target;
  return a.size === b.size && a.content!.length === b.content!.length && a.content!.every((id, i) => id === b.content![i]);
}

/** Every path that differs from snapshot `from` to snapshot `to`, in path order. */
export async function* diffSnapshots(store: Store, from: string, to: string): AsyncGenerator<Change> {
  await store.syncIndex();
  const [a, b] = [await store.getSnapshot(from), await store.getSnapshot(to)];
  yield* diffTrees(store, a.tree, b.tree, "");
}

async function* everything(store: Store, e: TreeEntry, path: string, change: "added" | "removed"): AsyncGenerator<Change> {
  yield { path, change, type: e.type };
  if (e.type !== "dir") return;
  for (const c of await store.readTree(e.tree!, path)) yield* everything(store, c, `${path}/${c.name}`, change);
}

async function* diffTrees(store: Store, treeA: string, treeB: string, prefix: string): AsyncGenerator<Change> {
  if (treeA === treeB) return;
  const [as, bs] = [await store.readTree(treeA, prefix || "."), await store.readTree(treeB, prefix || ".")];
  let i = 0;
  let j = 0;
  while (i < as.length || j < bs.length) {
    const ea = as[i];
    const eb = bs[j];
    const order = !ea ? 1 : !eb ? -1 : ea.name < eb.name ? -1 : ea.name > eb.name ? 1 : 0;
    if (order < 0) {
      yield* everything(store, ea!, prefix + ea!.name, "removed");
      i++;
      continue;
    }
    if (order > 0) {
      yield* everything(store, eb!, prefix + eb!.name, "added");
      j++;
      continue;
    }
    const path = prefix + eb!.name;
    i++;
    j++;
    if (ea!.type !== eb!.type) {
      yield { path, change: "type", type: eb!.type };
      continue;
    }
    if (eb!.type === "dir") {
      if (!sameMeta(ea!, eb!)) yield { path, change: "metadata", type: "dir" };
      yield* diffTrees(store, ea!.tree!, eb!.tree!, `${path}/`);
    } else if (!sameContent(ea!, eb!)) yield { path, change: "modified", type: eb!.type };
    else if (!sameMeta(ea!, eb!)) yield { path, change: "metadata", type: eb!.type };
  }
}
