// Index files: which blobs each pack holds and where, so a read needs no pack
// header and a save can tell a chunk it already has. A save writes one when it
// ends (and every INDEX_FLUSH_PACKS packs); prune folds them together. Binary,
// sealed as an object of kind "index":
//
//   body  := "HIX1" packCount:u32 pack*
//   pack  := name:32 size:u32 count:u32 entry*
//   entry := id:32 type:u8 flags:u8 offset:u32 length:u32 rawLength:u32      (46 bytes)
//
// Read as untrusted: every count and range is checked against the bytes there
// are and the pack's size before anything is kept.
import { ID_BYTES, TAG_BYTES, fromHex, hex } from "./crypto.ts";
import { corrupt } from "./errors.ts";
import { BLOB_TYPES, type BlobEntry, FLAG_ZSTD, MAX_PACK_BLOBS, TRAILER_BYTES } from "./pack.ts";

const MAGIC = new TextEncoder().encode("HIX1");
const ENTRY = ID_BYTES + 1 + 1 + 4 + 4 + 4;
const PACK_HEAD = ID_BYTES + 4 + 4;
/** Blobs per index file; a bigger index is split. 46 MiB of body at most. */
export const MAX_INDEX_ENTRIES = 1_000_000;

export interface PackRecord {
  name: string;
  size: number;
  blobs: BlobEntry[];
}

/**
 * Encodes an index file. A pack's blobs are read once, in order, and may be
 * produced one at a time (the cache streams its rows: a first save's 24k
 * pending blobs as objects all at once cost ~12 MB of RSS at its end).
 */
export function encodeIndex(packs: Iterable<{ name: string; size: number; blobs: Iterable<BlobEntry> }>): Uint8Array {
  let out = new Uint8Array(8 + PACK_HEAD + 1024 * ENTRY);
  let v = new DataView(out.buffer);
  let p = 8;
  const room = (n: number) => {
    if (p + n <= out.length) return;
    const grown = new Uint8Array(Math.max(out.length * 2, p + n));
    grown.set(out.subarray(0, p));
    out = grown;
    v = new DataView(out.buffer);
  };
  let packCount = 0;
  for (const pack of packs) {
    room(PACK_HEAD);
    const head = p;
    out.set(fromHex(pack.name), head);
    v.setUint32(head + 32, pack.size, true);
    p += PACK_HEAD;
    let count = 0;
    for (const b of pack.blobs) {
      room(ENTRY);
      out.set(b.id, p);
      out[p + 32] = BLOB_TYPES[b.type];
      out[p + 33] = b.flags;
      v.setUint32(p + 34, b.offset, true);
      v.setUint32(p + 38, b.length, true);
      v.setUint32(p + 42, b.rawLength, true);
      p += ENTRY;
      count++;
    }
    v.setUint32(head + 36, count, true);
    packCount++;
  }
  out.set(MAGIC);
  v.setUint32(4, packCount, true);
  return out.slice(0, p);
}

/** Every pack of an index file, checked: blobs lie inside the pack's data, in order, without overlap. */
export function* decodeIndex(object: string, body: Uint8Array): Generator<PackRecord> {
  const v = new DataView(body.buffer, body.byteOffset, body.length);
  if (body.length < 8 || !MAGIC.every((b, i) => body[i] === b)) throw corrupt(object, "is not a hutch index");
  const packs = v.getUint32(4, true);
  let p = 8;
  let total = 0;
  for (let i = 0; i < packs; i++) {
    if (p + PACK_HEAD > body.length) throw corrupt(object, "is truncated");
    const name = hex(body.subarray(p, p + 32));
    const size = v.getUint32(p + 32, true);
    const count = v.getUint32(p + 36, true);
    p += PACK_HEAD;
    total += count;
    if (count > MAX_PACK_BLOBS || total > MAX_INDEX_ENTRIES || p + count * ENTRY > body.length)
      throw corrupt(object, `pack ${i} lists more blobs than the index holds`);
    const blobs: BlobEntry[] = [];
    let end = 0;
    for (let j = 0; j < count; j++, p += ENTRY) {
      const t = body[p + 32];
      const type = t === BLOB_TYPES.data ? "data" : t === BLOB_TYPES.tree ? "tree" : undefined;
      const flags = body[p + 33]!;
      const offset = v.getUint32(p + 34, true);
      const length = v.getUint32(p + 38, true);
      const rawLength = v.getUint32(p + 42, true);
      if (!type || (flags & ~FLAG_ZSTD) !== 0 || offset < end || length < TAG_BYTES || offset + length + TRAILER_BYTES > size) {
        throw corrupt(object, `pack ${name.slice(0, 16)} blob ${j} has an invalid entry`);
      }
      end = offset + length;
      blobs.push({ type, flags, id: body.slice(p, p + 32), offset, length, rawLength });
    }
    yield { name, size, blobs };
  }
  if (p !== body.length) throw corrupt(object, "has bytes after its last pack");
}
