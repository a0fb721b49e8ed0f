// Pack files: many encrypted blobs in one immutable object, so a store holds
// thousands of objects rather than millions, and a blob's size is never
// visible to whoever holds the store (the lengths are in the sealed header,
// and the pack is padded with random bytes to a Padmé length).
//
//   pack    := blob* padding header trailer
//   blob    := AES-256-GCM(packKey, nonce(0, offset), aad = type ‖ id, zstd?(plain))
//   header  := AES-256-GCM(packKey, nonce(1, 0), aad = "pack-header", entries)
//   entries := count:u32 (type:u8 flags:u8 length:u32 rawLength:u32 id:32)*   offsets implicit, from 0
//   trailer := salt:16 headerLength:u32 version:u8 "HPAK"      (25 bytes)
//   packKey := HMAC-SHA-256(enc, "hutch-pack-v1" ‖ salt)
//
// The pack's name is the SHA-256 of all its bytes, so a backend can verify
// what it holds without the key.
import { closeSync, openSync, unlinkSync, writeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { ID_BYTES, TAG_BYTES, hex, nonce, objectKey, open, padme, salt, seal, sealParts } from "./crypto.ts";
import { corrupt } from "./errors.ts";

export const BLOB_TYPES = { data: 0, tree: 1 } as const;
export type BlobType = keyof typeof BLOB_TYPES;
export const FLAG_ZSTD = 1;

const MAGIC = new TextEncoder().encode("HPAK");
const VERSION = 1;
export const TRAILER_BYTES = 16 + 4 + 1 + 4;
const ENTRY_BYTES = 1 + 1 + 4 + 4 + ID_BYTES;
const HEADER_AAD = new TextEncoder().encode("pack-header");
/** A pack's header cannot list more blobs than this (a 16 MiB pack of 1-byte files holds ~300k). */
export const MAX_PACK_BLOBS = 1 << 20;
/** Nothing the store writes comes near this; anything larger is refused unread. */
export const MAX_PACK_BYTES = 2 ** 32 - 1;

export interface BlobEntry {
  type: BlobType;
  flags: number;
  id: Uint8Array;
  offset: number;
  /** Stored bytes: ciphertext and tag. */
  length: number;
  /** Bytes once opened and decompressed. */
  rawLength: number;
}

export function blobAad(type: BlobType, id: Uint8Array): Uint8Array {
  const aad = new Uint8Array(1 + ID_BYTES);
  aad[0] = BLOB_TYPES[type];
  aad.set(id, 1);
  return aad;
}

export function packKey(encKey: Uint8Array, packSalt: Uint8Array): Uint8Array {
  return objectKey(encKey, "pack", packSalt);
}

/**
 * The stored length of a pack of `len` bytes. A pack that reached the target
 * holds at least target / maxChunk blobs (4 with the defaults) whose lengths
 * only its sealed header knows, so it is only rounded to 4 KiB. A short pack
 * (the last of a save: often one or two files) would show a file's compressed
 * size nearly exactly, so it is padded to a Padmé length (at most ~12% more,
 * in exchange for leaking O(log log n) bits of its length).
 */
export function padTo(len: number, target: number): number {
  return len < target ? padme(len) : Math.ceil(len / 4096) * 4096;
}

/** Builds one pack in a temporary file, hashing as it writes. */
export class PackWriter {
  private readonly fd: number;
  private readonly salt = salt();
  private readonly key: Uint8Array;
  private readonly hasher = new Bun.CryptoHasher("sha256");
  /** The entries table being built (putEntry), not objects: a pack of small files lists ~15k blobs. */
  private table = new Uint8Array(4 + 64 * ENTRY_BYTES);
  private count = 0;
  private written = 0;
  private closed = false;

  /** @param target the pack size a full pack reaches (a shorter one is padded with Padmé) */
  constructor(
    encKey: Uint8Array,
    readonly path: string,
    private readonly target: number,
  ) {
    this.key = packKey(encKey, this.salt);
    this.fd = openSync(path, "wx", 0o600);
  }

  /** Bytes of blobs so far: what the pack size target is compared with. */
  get size(): number {
    return this.written;
  }

  /** Encrypts and appends one blob whose (possibly compressed) bytes are `data`. */
  add(type: BlobType, id: Uint8Array, data: Uint8Array, compressed: boolean, rawLength: number): BlobEntry {
    const offset = this.written;
    for (const part of sealParts(this.key, nonce(0, offset), data, blobAad(type, id))) this.write(part);
    const entry = { type, flags: compressed ? FLAG_ZSTD : 0, id, offset, length: this.written - offset, rawLength };
    const at = 4 + this.count * ENTRY_BYTES;
    if (at + ENTRY_BYTES > this.table.length) {
      const grown = new Uint8Array(this.table.length * 2);
      grown.set(this.table);
      this.table = grown;
    }
    putEntry(this.table, at, entry);
    this.count++;
    return entry;
  }

  private write(bytes: Uint8Array): void {
    let off = 0;
    while (off < bytes.length) off += writeSync(this.fd, bytes, off, bytes.length - off);
    this.hasher.update(bytes);
    this.written += bytes.length;
  }

  /**
   * Pads, seals the header and closes (the backend's putFile makes the file
   * durable, off this thread); returns the pack's name and
   * size, and its entries table unsealed.
   */
  finish(): { name: string; size: number; entries: Uint8Array } {
    new DataView(this.table.buffer).setUint32(0, this.count, true);
    const header = this.table.slice(0, 4 + this.count * ENTRY_BYTES);
    const sealedHeader = seal(this.key, nonce(1, 0), header, HEADER_AAD);
    const unpadded = this.written + sealedHeader.length + TRAILER_BYTES;
    const padding = padTo(unpadded, this.target) - unpadded;
    if (padding > 0) this.write(new Uint8Array(randomBytes(padding)));
    this.write(sealedHeader);
    const trailer = new Uint8Array(TRAILER_BYTES);
    trailer.set(this.salt);
    new DataView(trailer.buffer).setUint32(16, sealedHeader.length, true);
    trailer[20] = VERSION;
    trailer.set(MAGIC, 21);
    this.write(trailer);
    closeSync(this.fd);
    this.closed = true;
    return { name: this.hasher.digest("hex"), size: this.written, entries: header };
  }

  /** Closes and removes the temporary file (a save that failed). */
  discard(): void {
    if (!this.closed) closeSync(this.fd);
    this.closed = true;
    try {
      unlinkSync(this.path);
    } catch {
      // Already moved or removed.
    }
  }
}

/** Where a pack's header is, from its trailer; refuses what cannot be one. */
export function parseTrailer(object: string, trailer: Uint8Array, packSize: number): { salt: Uint8Array; headerLength: number } {
  if (trailer.length !== TRAILER_BYTES || !MAGIC.every((b, i) => trailer[21 + i] === b))
    throw corrupt(object, "is not a hutch pack (bad trailer)");
  if (trailer[20] !== VERSION) throw corrupt(object, `has pack version ${trailer[20]}, this hutch reads ${VERSION}`);
  const headerLength = new DataView(trailer.buffer, trailer.byteOffset, trailer.length).getUint32(16, true);
  if (headerLength < 4 + TAG_BYTES || headerLength + TRAILER_BYTES > packSize) throw corrupt(object, "has a header length beyond the pack");
  return { salt: trailer.slice(0, 16), headerLength };
}

/**
 * One blob's row of a pack's entries table, the plaintext of its header
 * (`entries` above; 42 bytes a blob). A pack's blob list crosses from the
 * seal worker as this one buffer rather than thousands of objects: posting a
 * 15k-blob pack of small files as objects cost a first save ~20 MB of RSS.
 */
function putEntry(table: Uint8Array, at: number, e: Omit<BlobEntry, "offset">): void {
  table[at] = BLOB_TYPES[e.type];
  table[at + 1] = e.flags;
  for (let i = 0; i < 4; i++) {
    table[at + 2 + i] = (e.length >>> (8 * i)) & 0xff;
    table[at + 6 + i] = (e.rawLength >>> (8 * i)) & 0xff;
  }
  table.set(e.id, at + 10);
}

/**
 * Reads an entries table, checked: every blob lies before `dataEnd`, in
 * order, without overlap. The ids are views into `header`.
 */
export function decodeEntries(object: string, header: Uint8Array, dataEnd: number): BlobEntry[] {
  const v = new DataView(header.buffer, header.byteOffset, header.length);
  const count = header.length >= 4 ? v.getUint32(0, true) : -1;
  if (count < 0 || count > MAX_PACK_BLOBS || header.length !== 4 + count * ENTRY_BYTES) throw corrupt(object, "header has a bad length");
  const entries: BlobEntry[] = [];
  let offset = 0;
  for (let i = 0, p = 4; i < count; i++, p += ENTRY_BYTES) {
    const t = header[p]!;
    const type = t === 0 ? "data" : t === 1 ? "tree" : undefined;
    const length = v.getUint32(p + 2, true);
    const rawLength = v.getUint32(p + 6, true);
    if (!type || (header[p + 1]! & ~FLAG_ZSTD) !== 0 || length < TAG_BYTES || offset + length > dataEnd)
      throw corrupt(object, `header entry ${i} is invalid`);
    entries.push({ type, flags: header[p + 1]!, id: header.subarray(p + 10, p + 10 + ID_BYTES), offset, length, rawLength });
    offset += length;
  }
  return entries;
}

/** Opens and checks a pack's header (decodeEntries). */
export function parseHeader(
  object: string,
  encKey: Uint8Array,
  packSalt: Uint8Array,
  sealedHeader: Uint8Array,
  packSize: number,
): BlobEntry[] {
  const header = open(packKey(encKey, packSalt), nonce(1, 0), sealedHeader, HEADER_AAD);
  if (!header) throw corrupt(object, "header fails authentication");
  return decodeEntries(object, header, packSize - TRAILER_BYTES - sealedHeader.length);
}

/** Opens one blob's stored bytes; null when they do not authenticate as (type, id) in this pack. */
export function openBlob(key: Uint8Array, entry: Pick<BlobEntry, "type" | "id" | "offset">, stored: Uint8Array): Uint8Array | null {
  return open(key, nonce(0, entry.offset), stored, blobAad(entry.type, entry.id));
}

export function describeBlob(type: BlobType, id: Uint8Array): string {
  return `${type} blob ${hex(id).slice(0, 16)}`;
}
