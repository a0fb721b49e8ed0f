// The maintenance lock: prune and check take it so that two of them never
// delete or judge under each other. Saves and restores never look at it, so a
// prune never makes a save wait (restic#2059). It is an object the backend
// refuses to create twice; a holder that died on this host (its pid is gone)
// or that is older than STALE_MS anywhere is taken over, with the takeover
// reported in the new holder's result.
import { hostname } from "node:os";
import { processAlive } from "../procs.ts";
import { StoreError } from "./errors.ts";
import { LockBody, getJson, sealObject } from "./objects.ts";
import type { Store } from "./store.ts";

const NAME = "maintenance";
/** A holder on another host is presumed dead after this long (a prune of a very big store runs for hours, not days). */
export const STALE_MS = 24 * 3600 * 1000;

export interface Lock {
  release(): Promise<void>;
  /** Set when a stale lock was taken over: whose it was. */
  tookOver?: string;
}

export async function acquireMaintenance(store: Store, what: string): Promise<Lock> {
  const body: LockBody = { v: 1, host: hostname(), pid: process.pid, time: store.clock(), nonce: crypto.randomUUID() };
  const { bytes } = sealObject(store.keys.enc, "locks", new TextEncoder().encode(JSON.stringify(body)));
  let tookOver: string | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await store.backend.put("locks", NAME, bytes)) {
      return { tookOver, release: () => store.backend.delete("locks", NAME) };
    }
    let holder: LockBody;
    try {
      // Lock objects are not content-addressed: the name is fixed, so only the seal is checked.
      holder = await getJson(store.backend, store.keys.enc, "locks", NAME, LockBody, undefined, false);
    } catch (err) {
      if (err instanceof StoreError && err.code === "not_found") continue;
      throw err;
    }
    const sameHost = holder.host === body.host;
    const stale = (sameHost && holder.pid !== process.pid && !processAlive(holder.pid)) || store.clock() - holder.time > STALE_MS;
    const who = `pid ${holder.pid} on ${holder.host} since ${new Date(holder.time).toISOString()}`;
    if (!stale) {
      throw new StoreError(
        "conflict",
        `cannot ${what}: a prune or check is running on this store (${who})`,
        "wait for it to finish; saves and restores do not need to wait",
      );
    }
    tookOver = who;
    await store.backend.delete("locks", NAME);
  }
  throw new StoreError("conflict", `cannot ${what}: the store's maintenance lock keeps changing hands`, "try again");
}
