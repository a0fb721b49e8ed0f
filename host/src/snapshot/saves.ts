// Save registrations: how a prune knows, without timing, which saves may
// still commit a snapshot that reuses a marked pack.
//
// A save puts `saves/<name>` before it loads the marks and deletes it after
// its snapshot object is written (or when it gives up). A prune, once its mark
// is visible, lists the registrations and writes them into the mark; a later
// prune deletes a mark's packs only when none of those saves is still
// registered, and it lists registrations before it lists snapshots. So a save
// that could have missed the mark has either written its snapshot before that
// listing (and the delete phase sees what it needs) or given up. No write may
// take "too long": every comparison is between a write that has finished and
// a read that starts after it.
//
// A registration whose process is gone (same host, pid dead) or that is older
// than the longest a save may run is stale: its save cannot commit any more,
// because a save checks its run time again after its snapshot is written and
// takes the snapshot back when it ran too long.
import { hostname } from "node:os";
import { StoreError } from "./errors.ts";
import { processAlive } from "../procs.ts";
import { SaveBody, type SnapshotBody, getJson, putJson, sealObject } from "./objects.ts";
import type { Store } from "./store.ts";

/** The longest a save may run before it must not commit: the grace period less a tenth (clock skew between hosts). */
export function maxSaveMs(graceMs: number): number {
  return graceMs - Math.ceil(graceMs / 10);
}

/** Points where a committing save awaits `pause` (test seams). */
export type CommitPoint = "before-put" | "after-put";

export class SaveRegistration {
  private constructor(
    private readonly store: Store,
    readonly name: string,
    /** When the save began, by the store's clock, read before the registration was written. */
    readonly started: number,
  ) {}

  /** Registers a save; call before the save syncs the index and loads the marks. */
  static async begin(store: Store): Promise<SaveRegistration> {
    const started = store.clock();
    const body: SaveBody = { v: 1, host: hostname(), pid: process.pid, time: started, nonce: crypto.randomUUID() };
    const { name, bytes } = sealObject(store.keys.enc, "saves", new TextEncoder().encode(JSON.stringify(body)));
    await store.backend.put("saves", name, bytes);
    return new SaveRegistration(store, name, started);
  }

  private tooLong(): StoreError | undefined {
    const ran = this.store.clock() - this.started;
    const limit = maxSaveMs(this.store.info.graceMs);
    if (ran <= limit) return undefined;
    return new StoreError(
      "failed",
      `this save ran for ${Math.round(ran / 1000)} s, longer than the ${Math.round(limit / 1000)} s a save may run in this store (its prune grace period less a tenth), so a concurrent prune may have removed data it reused; no snapshot was written`,
      "run the snapshot again (it reuses what this one stored)",
    );
  }

  /**
   * Writes the snapshot object, every blob it needs being in indexed packs
   * already. The run time is checked before the write (to spare it) and
   * after (the check that counts: the snapshot was visible by then), and a
   * snapshot found late is deleted again before this throws.
   */
  async commit(body: SnapshotBody, pause?: (p: CommitPoint) => Promise<void>): Promise<string> {
    const early = this.tooLong();
    if (early) throw early;
    await pause?.("before-put");
    const name = await putJson(this.store.backend, this.store.keys.enc, "snapshots", body);
    await pause?.("after-put");
    const late = this.tooLong();
    if (late) {
      await this.store.backend.delete("snapshots", name);
      throw late;
    }
    return name;
  }

  /** Removes the registration; after commit, or when the save gives up. Idempotent. */
  async end(): Promise<void> {
    await this.store.backend.delete("saves", this.name);
  }
}

export interface Registered {
  name: string;
  body: SaveBody;
  stale: boolean;
}

/** Every save registration in the store, each judged live or stale by the store's clock now. */
export async function listSaves(store: Store): Promise<Registered[]> {
  const out: Registered[] = [];
  const host = hostname();
  const limit = maxSaveMs(store.info.graceMs);
  for await (const info of store.backend.list("saves")) {
    let body: SaveBody;
    try {
      // The name is the hash of the sealed bytes, as for every other object.
      body = await getJson(store.backend, store.keys.enc, "saves", info.name, SaveBody, info.size);
    } catch (err) {
      if (err instanceof StoreError && err.code === "not_found") continue;
      throw err;
    }
    const dead = body.host === host && body.pid !== process.pid && !processAlive(body.pid);
    out.push({ name: info.name, body, stale: dead || store.clock() - body.time > limit });
  }
  return out;
}
