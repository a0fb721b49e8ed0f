// The snapshot store's API (README.md beside this file has the design):
//
//   const store = await openStore(storeLocation(home), { create: true });
//   const { id, stats } = await snapshotTree(store, "/path/to/tree", { source: "box web" });
//   await listSnapshots(store);
//   await browse(store, id, "src");
//   for await (const c of diffSnapshots(store, older, newer)) ...
//   await restoreTree(store, id, "/new/dir", { paths: ["src"] });
//   await prune(store, { policy: { keepLast: 10, keepDaily: 7 } });
//   await check(store, { readData: true });
//   store.close();
//
// Every function takes the Store, which holds the keys derived at open.
import { join } from "node:path";
import { StoreError } from "./errors.ts";
import { type CreateOptions, Store, type StoreLocation, type SnapshotRecord } from "./store.ts";

export {
  Store,
  type StoreLocation,
  type CreateOptions,
  type SnapshotRecord,
  type StoreInfo,
  DEFAULT_CHUNKS,
  DEFAULT_GRACE_MS,
  DEFAULT_PACK_BYTES,
} from "./store.ts";
export { snapshotTree, type SnapshotOptions, type SnapshotResult, type SavePoint } from "./save.ts";
export { restoreTree, type RestoreOptions, type RestoreResult } from "./restore.ts";
export { browse, diffSnapshots, type Change } from "./browse.ts";
export { prune, type PruneOptions, type PruneResult, type PrunePoint } from "./prune.ts";
export { check, type CheckOptions, type CheckResult, type Problem } from "./check.ts";
export { type KeepPolicy, keptByPolicy } from "./policy.ts";
export type { Progress, ProgressFn } from "./progress.ts";
export { LocalBackend } from "./local.ts";
export type { MasterKeys } from "./keys.ts";
export type { Backend, ObjectInfo, ObjectKind, Range } from "./backend.ts";
export { StoreError } from "./errors.ts";
export type { SnapshotStats } from "./objects.ts";

/** Where a store lives under $HUTCH_HOME: the store itself, the key files, the local cache. */
export function storeLocation(home: string, name = "default"): StoreLocation {
  return { dir: join(home, "snapshots", name), keysDir: join(home, "keys"), cacheDir: join(home, "cache", "snapshots") };
}

/** Opens a store; with `create`, makes it first if there is none. */
export async function openStore(
  location: StoreLocation,
  opts: { create?: boolean | Omit<CreateOptions, keyof StoreLocation> } = {},
): Promise<Store> {
  try {
    return await Store.open(location);
  } catch (err) {
    if (!opts.create || !(err instanceof StoreError) || err.code !== "not_found" || err.object !== "config") throw err;
    return Store.create({ ...location, ...(typeof opts.create === "object" ? opts.create : {}) });
  }
}

export function listSnapshots(store: Store): Promise<SnapshotRecord[]> {
  return store.listSnapshots();
}
