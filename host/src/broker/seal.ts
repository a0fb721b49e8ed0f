// Secrets at rest: libsodium's secretbox (XSalsa20-Poly1305) under one key
// kept in $HUTCH_HOME/keys/secrets.key (0600, in a 0700 directory). The
// daemon opens a value only at the moment it injects it.
import sodium from "libsodium-wrappers";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { HutchError } from "@hutch/shared";

export class Sealer {
  private constructor(private readonly key: Uint8Array) {}

  /** Loads the key, creating it on first use. Refuses a key file others can read. */
  static async load(keyPath: string): Promise<Sealer> {
    await sodium.ready;
    mkdirSync(dirname(keyPath), { recursive: true, mode: 0o700 });
    chmodSync(dirname(keyPath), 0o700);
    if (!existsSync(keyPath)) {
      const key = sodium.randombytes_buf(sodium.crypto_secretbox_KEYBYTES);
      try {
        const fd = openSync(keyPath, "wx", 0o600);
        writeSync(fd, key);
        closeSync(fd);
      } catch (err) {
        // Another daemon start made it first: use theirs.
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
    }
    const mode = statSync(keyPath).mode & 0o777;
    if (mode & 0o077) {
      throw new HutchError("config", `${keyPath} is readable by other users (mode ${mode.toString(8)})`, `restrict it: chmod 600 ${keyPath}`);
    }
    const key = new Uint8Array(readFileSync(keyPath));
    if (key.length !== sodium.crypto_secretbox_KEYBYTES) {
      throw new HutchError("config", `${keyPath} is not a hutch secrets key (${key.length} bytes)`, "restore it from a backup; without it the stored secrets cannot be opened");
    }
    return new Sealer(key);
  }

  seal(plain: Uint8Array): Uint8Array {
    const nonce = sodium.randombytes_buf(sodium.crypto_secretbox_NONCEBYTES);
    const box = sodium.crypto_secretbox_easy(plain, nonce, this.key);
    const out = new Uint8Array(nonce.length + box.length);
    out.set(nonce);
    out.set(box, nonce.length);
    return out;
  }

  open(sealed: Uint8Array): Uint8Array {
    const n = sodium.crypto_secretbox_NONCEBYTES;
    if (sealed.length <= n) throw new HutchError("failed", "a stored secret is truncated", "set it again: hutch secret set NAME");
    try {
      return sodium.crypto_secretbox_open_easy(sealed.subarray(n), sealed.subarray(0, n), this.key);
    } catch {
      throw new HutchError("failed", "a stored secret does not open with this home's key (keys/secrets.key changed?)", "set it again: hutch secret set NAME");
    }
  }
}
