// The fleet's one snapshot store: the encrypted store of snapshot/ on the
// JetStream backend, in the bucket hutch-snapshots, opened by every server
// with the fleet key (./key.ts). `hutch cluster init` makes it once, as
// `restic init` makes a repository; a server opens it at start and refuses to
// serve when its key does not open it.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import type { NatsConnection } from "@nats-io/transport-node";
import { StoreError, Store, storeLocation, type StoreLocation } from "../snapshot/index.ts";
import { JetStreamBackend } from "../snapshot/jetstream.ts";
import { clusterName } from "../store/jetstream/cluster.ts";
import { FleetKey } from "./key.ts";

const SNAPSHOT_BUCKET = "hutch-snapshots";

/** Where the fleet store is, for this home: the bucket, the fleet key, and the home's own index cache. */
async function location(nc: NatsConnection, home: string, keyFile: string, writeTimeoutMs?: number): Promise<StoreLocation> {
  const local = storeLocation(home);
  return {
    backend: await JetStreamBackend.open(nc, SNAPSHOT_BUCKET, {
      staging: join(home, "tmp", "snapshot-staging"),
      ...(writeTimeoutMs ? { writeTimeoutMs } : {}),
    }),
    keysDir: local.keysDir,
    cacheDir: local.cacheDir,
    keys: new FleetKey(keyFile, clusterName(nc)),
  };
}

/** Makes the fleet store and writes its key to keyFile; the store's id. */
export async function initFleetStore(nc: NatsConnection, home: string, keyFile: string): Promise<string> {
  if (existsSync(keyFile))
    throw new HutchError(
      "conflict",
      `${keyFile} exists: this server holds a fleet key already`,
      "to join the fleet it opens, start: hutch serve --cluster URLS --node NAME; to make a new fleet store, move that file away first",
    );
  const where = await location(nc, home, keyFile);
  let store: Store;
  try {
    store = await Store.create(where);
  } catch (err) {
    where.backend!.close();
    if (err instanceof StoreError && err.code === "conflict")
      throw new HutchError(
        "conflict",
        `the NATS cluster "${clusterName(nc)}" has a fleet snapshot store already`,
        `copy keys/fleet.key from the home of the server that made it to ${keyFile} (chmod 600), then start hutch serve --cluster`,
      );
    throw err;
  }
  const id = store.info.id;
  store.close();
  return id;
}

/** Opens the fleet store (its writes retried for writeTimeoutMs); a missing store or a key that does not open it is a config error naming the fix. */
export async function openFleetStore(nc: NatsConnection, home: string, keyFile: string, writeTimeoutMs?: number): Promise<Store> {
  const where = await location(nc, home, keyFile, writeTimeoutMs);
  const cluster = clusterName(nc);
  try {
    return await Store.open(where);
  } catch (err) {
    where.backend!.close();
    if (err instanceof StoreError && err.code === "not_found" && err.object === "config")
      throw new HutchError(
        "config",
        `the NATS cluster "${cluster}" has no fleet snapshot store yet`,
        "make it once, from one server: hutch cluster init --cluster URLS; then copy that home's keys/fleet.key to every other server",
      );
    if (err instanceof StoreError && err.code === "config")
      throw new HutchError(
        "config",
        `the fleet key ${keyFile} does not open the snapshot store on the NATS cluster "${cluster}" (another fleet's key, or altered)`,
        `copy keys/fleet.key from the home of the server that ran hutch cluster init to ${keyFile} (chmod 600), or pass --fleet-key FILE`,
      );
    throw err;
  }
}
