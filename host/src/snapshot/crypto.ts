// The store's cryptography, in one place. One HKDF per store open turns the
// master key into four subkeys; every encrypted thing gets a key of its own
// (HMAC of the encryption subkey and a random salt), so AES-GCM's 96-bit
// nonces can be counters that never repeat under one key. AES-256-GCM and
// HMAC-SHA-256 are BoringSSL's (node:crypto, Bun.CryptoHasher), with AES-NI
// and SHA-NI: AES-256-GCM seals 1 MiB chunks at ~5.6 GiB/s here, against
// ~0.34 GiB/s for libsodium's XChaCha20-Poly1305 in WebAssembly, which would
// cost more than the whole chunking budget (README, "measurements").
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from "node:crypto";
import { joinBytes } from "@hutch/shared/bytes";

export const KEY_BYTES = 32;
export const SALT_BYTES = 16;
export const TAG_BYTES = 16;
export const ID_BYTES = 32;

export interface StoreKeys {
  /** Keys objects and packs (via per-object subkeys). */
  enc: Uint8Array;
  /** Keys chunk and tree ids (HMAC-SHA-256): equal plaintexts, equal ids, in this store only. */
  id: Uint8Array;
  /** Keys the chunker's gear table. The one key a guest that chunks would be given. */
  chunk: Uint8Array;
  /** Keys the config's check value, which tells a wrong key from a damaged store. */
  check: Uint8Array;
}

/** The one key derivation of a store open. */
export function deriveKeys(master: Uint8Array, storeId: string): StoreKeys {
  const sub = (purpose: string) => new Uint8Array(hkdfSync("sha256", master, storeId, `hutch-snapshot-${purpose}-v1`, KEY_BYTES));
  return { enc: sub("enc"), id: sub("id"), chunk: sub("chunk"), check: sub("check") };
}

// HMACs are node:crypto's createHmac and one-shot hashes Bun.SHA256.hash, not
// a new Bun.CryptoHasher each: the same speed (~1.7 GiB/s), but a keyed
// CryptoHasher leaves ~0.7 KB of native memory the collector does not see
// until it runs, ~0.15 KB for createHmac. A save makes one keyed id a chunk
// and a tree read one more: 20k of them raised RSS by 16 MB against 3 MB.

/** A keyed id: HMAC-SHA-256 under the id key. */
export function keyedId(idKey: Uint8Array, data: Uint8Array): Uint8Array {
  return new Uint8Array(createHmac("sha256", idKey).update(data).digest().buffer);
}

export function mac(key: Uint8Array, ...parts: (Uint8Array | string)[]): Uint8Array {
  const h = createHmac("sha256", key);
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest().buffer);
}

/** SHA-256 of stored bytes: the name of every content-addressed object. */
export function contentHash(data: Uint8Array): string {
  return Bun.SHA256.hash(data, "hex");
}

export function salt(): Uint8Array {
  return new Uint8Array(randomBytes(SALT_BYTES));
}

/** The key for one object or pack: HMAC(enc, domain ‖ salt). Used for at most 2^32 messages, each with its own counter nonce. */
export function objectKey(encKey: Uint8Array, domain: string, objectSalt: Uint8Array): Uint8Array {
  return mac(encKey, `hutch-${domain}-v1`, objectSalt);
}

/** A 96-bit nonce from a message class and a counter, unique per (key, message). */
export function nonce(cls: number, counter: number): Uint8Array {
  const n = new Uint8Array(12);
  const v = new DataView(n.buffer);
  v.setUint32(0, cls);
  v.setUint32(4, Math.floor(counter / 2 ** 32));
  v.setUint32(8, counter >>> 0);
  return n;
}

/** AES-256-GCM as pieces to write in order (ciphertext, its tail, the 16-byte tag), copying nothing. */
export function sealParts(key: Uint8Array, iv: Uint8Array, plain: Uint8Array, aad: Uint8Array): Uint8Array[] {
  const c = createCipheriv("aes-256-gcm", key, iv);
  c.setAAD(aad);
  const head = c.update(plain);
  const tail = c.final();
  return tail.length > 0 ? [head, tail, c.getAuthTag()] : [head, c.getAuthTag()];
}

/** AES-256-GCM: ciphertext ‖ 16-byte tag. */
export function seal(key: Uint8Array, iv: Uint8Array, plain: Uint8Array, aad: Uint8Array): Uint8Array {
  return joinBytes(sealParts(key, iv, plain, aad));
}

/** Opens what seal made, or returns null when it does not authenticate. */
export function open(key: Uint8Array, iv: Uint8Array, sealed: Uint8Array, aad: Uint8Array): Uint8Array | null {
  if (sealed.length < TAG_BYTES) return null;
  try {
    const d = createDecipheriv("aes-256-gcm", key, iv);
    d.setAAD(aad);
    d.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const head = d.update(sealed.subarray(0, sealed.length - TAG_BYTES));
    const tail = d.final();
    if (tail.length === 0) return new Uint8Array(head.buffer, head.byteOffset, head.length);
    const out = new Uint8Array(head.length + tail.length);
    out.set(head);
    out.set(tail, head.length);
    return out;
  } catch {
    return null;
  }
}

/**
 * Padmé (Nikitin et al., PURBs, PETS 2019): the length a stored object is
 * padded to. It leaks O(log log n) bits of the length and costs at most
 * ~12% (under 3% at pack sizes), so an object's size says little about the
 * sizes of the chunks inside it.
 */
export function padme(len: number): number {
  if (len < 2) return len;
  const e = Math.floor(Math.log2(len));
  const s = Math.floor(Math.log2(e)) + 1;
  const unit = 2 ** (e - s);
  return Math.ceil(len / unit) * unit;
}

export function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.length).toString("hex");
}

const HEX_ID = /^[0-9a-f]{64}$/;
export function isHexId(s: string): boolean {
  return HEX_ID.test(s);
}

export function fromHex(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, "hex"));
}
