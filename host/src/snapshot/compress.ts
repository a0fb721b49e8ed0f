// zstd for blobs, bounded on the way back. A large save compresses in its
// seal worker (seal-thread.ts), so it overlaps the saving thread's reading,
// chunking and hashing on a second core. Decompression is refused unless the bytes
// are exactly one zstd frame that declares its size, that size is the blob's
// raw length, and its raw and RLE blocks (whose sizes the headers give) do not
// regenerate more than that: Bun's decompressor would otherwise follow
// concatenated frames and grow its output without limit, and a store may come
// from another machine. Within one frame it stops at the declared size (a
// frame declaring 1 MiB whose blocks regenerate 512 MiB fails with ~2 MB more
// RSS), so a compressed block is not counted at its 128 KiB maximum: zstd's
// block pre-splitting (1.5.5 on, Bun 1.4.5's) cuts blocks of 5-100 KiB, and
// counting each at 128 KiB refused half the chunks of a qcow2 disk and a fifth
// of a compiled binary's, which a carried VM box (fleet/carry.ts) found.

/** Level 3 (zstd's default): against level 1, 11% smaller on this repo's TypeScript (29.1% against 32.9% of its size), at 199 against 287 MiB/s a core (README, "measurements"). */
export const ZSTD_LEVEL = 3;
/**
 * Below this a blob is compressed and decompressed inline. A 5 KB file costs
 * ~25–55 µs of zstd, mostly setting up its context; on the thread pool that
 * was no faster, and the promises and buffers in flight for thousands of
 * small files raised a save's peak RSS by ~35 MB.
 */
export const INLINE_BELOW = 64 * 1024;
/** Keep the compressed form only if it saves at least this fraction. */
const MIN_SAVING = 1 / 32;
/** A blob at least this big is first sampled: if its start does not compress, neither is tried on the whole (random data, media, archives). */
const SAMPLE_ABOVE = 256 * 1024;
const SAMPLE_BYTES = 32 * 1024;
const BLOCK_MAX = 128 * 1024;

export interface Packed {
  data: Uint8Array;
  compressed: boolean;
}

function choose(plain: Uint8Array, z: Uint8Array): Packed {
  return z.length <= plain.length * (1 - MIN_SAVING) ? { data: z, compressed: true } : { data: plain, compressed: false };
}

/**
 * Compresses a blob for a pack. A large one whose first 32 KiB does not
 * compress is stored as it is, untried (random data, media, archives).
 * Synchronous: the seal worker (seal-thread.ts) is the thread that waits.
 */
export function compressSync(plain: Uint8Array): Packed {
  if (plain.length >= SAMPLE_ABOVE) {
    const sample = plain.subarray(0, SAMPLE_BYTES);
    if (Bun.zstdCompressSync(sample, { level: 1 }).length > sample.length * (1 - MIN_SAVING)) return { data: plain, compressed: false };
  }
  return choose(plain, Bun.zstdCompressSync(plain, { level: ZSTD_LEVEL }));
}

/**
 * Why `frame` may not be decompressed to `rawLength` bytes, or null when it
 * may (RFC 8878: one frame, no dictionary, content size present and equal,
 * every block accounted for, nothing after the frame).
 */
export function frameProblem(frame: Uint8Array, rawLength: number): string | null {
  const n = frame.length;
  if (n < 6 || frame[0] !== 0x28 || frame[1] !== 0xb5 || frame[2] !== 0x2f || frame[3] !== 0xfd) return "not a zstd frame";
  const fhd = frame[4]!;
  const fcsFlag = fhd >> 6;
  const single = (fhd >> 5) & 1;
  if (fhd & 0x08) return "reserved bit set";
  if (fhd & 0x03) return "uses a dictionary";
  const checksum = (fhd >> 2) & 1;
  let p = 5 + (single ? 0 : 1);
  const fcsBytes = [single ? 1 : 0, 2, 4, 8][fcsFlag]!;
  if (fcsBytes === 0) return "does not declare its size";
  if (p + fcsBytes > n) return "truncated header";
  let size = 0;
  for (let i = fcsBytes - 1; i >= 0; i--) size = size * 256 + frame[p + i]!;
  if (fcsBytes === 2) size += 256;
  p += fcsBytes;
  if (size !== rawLength) return `declares ${size} bytes, the index says ${rawLength}`;
  let known = 0;
  for (;;) {
    if (p + 3 > n) return "truncated block";
    const head = frame[p]! | (frame[p + 1]! << 8) | (frame[p + 2]! << 16);
    p += 3;
    const last = head & 1;
    const type = (head >> 1) & 3;
    const blockSize = head >>> 3;
    if (type === 3) return "reserved block type";
    if (type === 1) {
      p += 1;
      known += blockSize;
    } else {
      p += blockSize;
      if (type === 0) known += blockSize;
    }
    if (p > n) return "truncated block";
    if (known > rawLength) return "its blocks would regenerate more than its declared size";
    if (blockSize > BLOCK_MAX) return "a block is larger than zstd allows";
    if (last) break;
  }
  p += checksum * 4;
  if (p !== n) return p > n ? "truncated checksum" : "has bytes after its frame";
  return null;
}

/** Decompresses a checked frame on the thread pool; the result has exactly rawLength bytes or this throws. */
export async function decompress(frame: Uint8Array, rawLength: number): Promise<Uint8Array> {
  const problem = frameProblem(frame, rawLength);
  if (problem) throw new Error(`compressed data ${problem}`);
  const out = frame.length < INLINE_BELOW ? Bun.zstdDecompressSync(frame) : await Bun.zstdDecompress(frame);
  if (out.length !== rawLength) throw new Error(`decompressed to ${out.length} bytes, expected ${rawLength}`);
  return out;
}
