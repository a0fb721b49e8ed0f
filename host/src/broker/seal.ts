// Secrets at rest: libsodium's secretbox (XSalsa20-Poly1305) under one key
// kept in $HUTCH_HOME/keys/secrets.key (0600, in a 0700 directory). The
// daemon opens a value only at the moment it injects it. libsodium itself
// loads with the first secret used (~120 ms of WebAssembly start-up that a
// daemon with no secrets, or a CLI waiting for it to be ready, should not pay).
import type Sodium from "libsodium-wrappers";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { HutchError } from "@hutch/shared";

/** crypto_secretbox_KEYBYTES and _NONCEBYTES: fixed by the algorithm. */
const KEY_BYTES = 32;
const NONCE_BYTES = 24;

export class Sealer {
  private sodium?: Promise<typeof Sodium>;

  private constructor(private readonly key: Uint8Array) {}

  /** Loads the key, creating it on first use. Refuses a key file others can read. */
  static load(keyPath: string): Sealer {
    mkdirSync(dirname(keyPath), { recursive: true, mode: 0o700 });
    chmodSync(dirname(keyPath), 0o700);
    if (!existsSync(keyPath)) {
      try {
        const fd = openSync(keyPath, "wx", 0o600);
        writeSync(fd, crypto.getRandomValues(new Uint8Array(KEY_BYTES)));
        closeSync(fd);
      } catch (err) {
        // Another daemon start made it first: use theirs.
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
    }
    const mode = statSync(keyPath).mode & 0o777;
    if (mode & 0o077) {
      throw new HutchError(
        "config",
        `${keyPath} is readable by other users (mode ${mode.toString(8)})`,
        `restrict it: chmod 600 ${keyPath}`,
      );
    }
    const key = new Uint8Array(readFileSync(keyPath));
    if (key.length !== KEY_BYTES) {
      throw new HutchError(
        "config",
        `${keyPath} is not a hutch secrets key (${key.length} bytes)`,
        "restore it from a backup; without it the stored secrets cannot be opened",
      );
    }
    return new Sealer(key);
  }

  private lib(): Promise<typeof Sodium> {
    this.sodium ??= import("libsodium-wrappers").then(async (m) => {
      await m.default.ready;
      return m.default;
    });
    return this.sodium;
  }

  async seal(plain: Uint8Array): Promise<Uint8Array> {
    const sodium = await this.lib();
    const nonce = sodium.randombytes_buf(NONCE_BYTES);
    const box = sodium.crypto_secretbox_easy(plain, nonce, this.key);
    const out = new Uint8Array(nonce.length + box.length);
    out.set(nonce);
    out.set(box, nonce.length);
    return out;
  }

  async open(sealed: Uint8Array): Promise<Uint8Array> {
    const sodium = await this.lib();
    if (sealed.length <= NONCE_BYTES) throw new HutchError("failed", "a stored secret is truncated", "set it again: hutch secret set NAME");
    try {
      return sodium.crypto_secretbox_open_easy(sealed.subarray(NONCE_BYTES), sealed.subarray(0, NONCE_BYTES), this.key);
    } catch {
      throw new HutchError(
        "failed",
        "a stored secret does not open with this home's key (keys/secrets.key changed?)",
        "set it again: hutch secret set NAME",
      );
    }
  }
}
