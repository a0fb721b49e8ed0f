// The fleet's snapshot key: one file every server of a fleet holds, so each
// opens the same encrypted store. It is the store's master key with the
// store's id, written once by `hutch cluster init` and copied by the
// operator (as a restic repository's password is handed to each machine that
// backs up into it); it never goes into NATS. A home's own key files cannot
// be copied instead: each home seals its master keys with its own KEK.
// Like snapshots.key it is a random key, 0600, and whoever holds it reads
// every snapshot of the fleet.
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { HutchError } from "@hutch/shared";
import { checkPrivate, createPrivate, type MasterKeys } from "../snapshot/keys.ts";

/** Where a server looks for the fleet key unless told (`--fleet-key FILE`). */
export function defaultFleetKey(home: string): string {
  return join(home, "keys", "fleet.key");
}

const TAG = "hutch-fleet-key-1";
const LINE = /^hutch-fleet-key-1 ([0-9a-f]{32}) ([0-9a-f]{64})\n?$/;

export class FleetKey implements MasterKeys {
  constructor(
    /** The key file. */
    readonly path: string,
    /** The cluster, for errors. */
    private readonly cluster: string,
  ) {}

  createMaster(storeId: string): Uint8Array {
    const master = crypto.getRandomValues(new Uint8Array(32));
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    createPrivate(this.path, new TextEncoder().encode(`${TAG} ${storeId} ${Buffer.from(master).toString("hex")}\n`));
    return master;
  }

  master(storeId: string): Uint8Array {
    if (!existsSync(this.path)) {
      throw new HutchError(
        "config",
        `no fleet key at ${this.path} for the snapshot store on the NATS cluster "${this.cluster}"`,
        `copy keys/fleet.key from the home of the server that ran hutch cluster init to ${this.path} (chmod 600), or pass --fleet-key FILE`,
      );
    }
    const k = this.read();
    if (k.storeId !== storeId) {
      throw new HutchError(
        "config",
        `${this.path} is the key of fleet store ${k.storeId}, but the snapshot store on the NATS cluster "${this.cluster}" is ${storeId}`,
        `copy the fleet key that hutch cluster init wrote for this cluster to ${this.path}, or pass --fleet-key FILE`,
      );
    }
    return k.master;
  }

  private read(): { storeId: string; master: Uint8Array } {
    checkPrivate(this.path);
    const m = LINE.exec(readFileSync(this.path, "utf8"));
    if (!m)
      throw new HutchError(
        "config",
        `${this.path} is not a hutch fleet key`,
        "copy it again from the server that ran hutch cluster init (keys/fleet.key)",
      );
    return { storeId: m[1]!, master: new Uint8Array(Buffer.from(m[2]!, "hex")) };
  }
}
