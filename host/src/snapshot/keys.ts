// Keys stay in $HUTCH_HOME/keys, never in a store. One random key-encryption
// key (snapshots.key, 32 bytes, 0600 in a 0700 directory, like secrets.key)
// seals each store's random master key (snapshot-<storeId>.key). Sealing one
// store's key at a time lets a store be handed to another machine with its key
// alone, and the KEK changed without rewriting a store. Files are random keys,
// not passwords, so there is no password KDF to pay: opening a store costs one
// AES-GCM open and one HKDF (crypto.ts).
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, fsyncSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared/store";
import { KEY_BYTES, SALT_BYTES, nonce, objectKey, open, salt, seal } from "./crypto.ts";

const KEK_FILE = "snapshots.key";
const MAGIC = new TextEncoder().encode("HSK1");
const STORE_ID = /^[0-9a-f]{32}$/;

/**
 * Where a store's master key comes from: the home's key files (SnapshotKeys),
 * or one file shared by a fleet's servers (fleet/key.ts). Both throw a
 * HutchError naming the file and the fix when they have no key for the store.
 */
export interface MasterKeys {
  /** Makes, keeps and returns a new master key for a store that is being created. */
  createMaster(storeId: string): Uint8Array;
  /** The master key of an existing store. */
  master(storeId: string): Uint8Array;
}

export function masterKeyFile(keysDir: string, storeId: string): string {
  return join(keysDir, `snapshot-${storeId}.key`);
}

export function checkPrivate(path: string): void {
  const mode = statSync(path).mode & 0o777;
  if (mode & 0o077) {
    throw new HutchError("config", `${path} is readable by other users (mode ${mode.toString(8)})`, `restrict it: chmod 600 ${path}`);
  }
}

/** Writes a new file with mode 0600, durably, failing if it exists. */
export function createPrivate(path: string, data: Uint8Array): void {
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  if (existsSync(path)) throw new HutchError("conflict", `${path} already exists`);
  renameSync(tmp, path);
}

export class SnapshotKeys implements MasterKeys {
  private constructor(
    private readonly dir: string,
    private readonly kek: Uint8Array,
  ) {}

  /** Loads the KEK from keysDir, creating it on first use; refuses key files others can read. */
  static load(keysDir: string): SnapshotKeys {
    mkdirSync(keysDir, { recursive: true, mode: 0o700 });
    chmodSync(keysDir, 0o700);
    const path = join(keysDir, KEK_FILE);
    if (!existsSync(path)) {
      try {
        const fd = openSync(path, "wx", 0o600);
        writeSync(fd, crypto.getRandomValues(new Uint8Array(KEY_BYTES)));
        fsyncSync(fd);
        closeSync(fd);
      } catch (err) {
        // Another process made it first: use theirs.
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
    }
    checkPrivate(path);
    const kek = new Uint8Array(readFileSync(path));
    if (kek.length !== KEY_BYTES) {
      throw new HutchError(
        "config",
        `${path} is not a hutch snapshot key (${kek.length} bytes)`,
        "restore it from a backup; without it no snapshot store can be opened",
      );
    }
    return new SnapshotKeys(keysDir, kek);
  }

  /** Makes and seals a new master key for a store that is being created. */
  createMaster(storeId: string): Uint8Array {
    if (!STORE_ID.test(storeId)) throw new HutchError("invalid", `bad store id ${JSON.stringify(storeId)}`);
    const master = crypto.getRandomValues(new Uint8Array(KEY_BYTES));
    const s = salt();
    const body = seal(objectKey(this.kek, "master", s), nonce(0, 0), master, new TextEncoder().encode(storeId));
    const file = new Uint8Array(MAGIC.length + SALT_BYTES + body.length);
    file.set(MAGIC);
    file.set(s, MAGIC.length);
    file.set(body, MAGIC.length + SALT_BYTES);
    createPrivate(masterKeyFile(this.dir, storeId), file);
    return master;
  }

  /** The master key of a store, unsealed. */
  master(storeId: string): Uint8Array {
    const path = masterKeyFile(this.dir, storeId);
    if (!existsSync(path)) {
      throw new HutchError(
        "not_found",
        `no key for snapshot store ${storeId} in ${this.dir}`,
        `copy ${path} from the machine that made the store`,
      );
    }
    checkPrivate(path);
    const file = new Uint8Array(readFileSync(path));
    const body = file.subarray(MAGIC.length + SALT_BYTES);
    const ok = file.length > MAGIC.length + SALT_BYTES && MAGIC.every((b, i) => file[i] === b);
    const key = ok
      ? open(
          objectKey(this.kek, "master", file.subarray(MAGIC.length, MAGIC.length + SALT_BYTES)),
          nonce(0, 0),
          body,
          new TextEncoder().encode(storeId),
        )
      : null;
    if (!key || key.length !== KEY_BYTES) {
      throw new HutchError(
        "config",
        `${path} does not open with ${join(this.dir, KEK_FILE)}`,
        "restore both key files from the same backup",
      );
    }
    return key;
  }
}
