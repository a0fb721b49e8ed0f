// Content-defined chunking: FastCDC (Xia et al., USENIX ATC 2016) with
// normalised chunking and cut-point skipping, rolling two bytes per step
// (FastCDC 2020). The gear table is derived from a per-store key, so the same
// file cuts at different places in two users' stores and chunk sizes do not
// say which known file is stored. A cut depends only on the bytes of its own
// chunk (the hash restarts at every chunk), so the host and the guest cut the
// same bytes the same way whatever their read sizes.
//
// Runtime-neutral: the key derivation is WebCrypto's HMAC-SHA-256, which Bun,
// Node and browsers all have.

export interface ChunkParams {
  /** No cut before this many bytes; a smaller file is one chunk. */
  minSize: number;
  /** The size cut points aim for (a power of two). */
  avgSize: number;
  /** A chunk is cut here if no content cut came first. */
  maxSize: number;
}

/** Bounds on what a store may ask for, checked where params are read from a store's config. */
export const CHUNK_LIMITS = { minSize: 64, maxSize: 64 * 1024 * 1024 } as const;

export class ChunkParamsError extends Error {
  override name = "ChunkParamsError";
}

/** Throws unless min < avg < max, avg is a power of two and the sizes are within CHUNK_LIMITS. */
export function checkChunkParams(p: ChunkParams): void {
  const { minSize, avgSize, maxSize } = p;
  const ints = [minSize, avgSize, maxSize].every((n) => Number.isSafeInteger(n) && n > 0);
  if (!ints) throw new ChunkParamsError(`chunk sizes must be positive integers (got ${minSize}/${avgSize}/${maxSize})`);
  if (!(minSize < avgSize && avgSize < maxSize))
    throw new ChunkParamsError(`chunk sizes need min < avg < max (got ${minSize}/${avgSize}/${maxSize})`);
  if ((avgSize & (avgSize - 1)) !== 0) throw new ChunkParamsError(`the average chunk size must be a power of two (got ${avgSize})`);
  if (minSize < CHUNK_LIMITS.minSize || maxSize > CHUNK_LIMITS.maxSize) {
    throw new ChunkParamsError(
      `chunk sizes must lie in ${CHUNK_LIMITS.minSize}..${CHUNK_LIMITS.maxSize} bytes (got ${minSize}/${maxSize})`,
    );
  }
  // Both masks need bits below bit 31 (the two-byte step shifts them left once).
  const bits = Math.log2(avgSize);
  if (bits < 4 || bits > 28) throw new ChunkParamsError(`the average chunk size must be 16 B..256 MiB (got ${avgSize})`);
}

/**
 * A mask of `n` one-bits ending at bit 30. A gear hash's bit k depends on the
 * last k+1 bytes, so the high bits see the widest window; bit 31 stays clear
 * so the mask can be shifted left once for the two-byte step.
 */
function highMask(n: number): number {
  return ((2 ** n - 1) * 2 ** (31 - n)) | 0;
}

const GEAR_LABEL = new TextEncoder().encode("hutch-chunk-gear-v1");

/**
 * The 256-entry gear table for a key: HMAC-SHA-256(key, label ‖ block) for
 * blocks 0..31, read as little-endian 32-bit words. Derive once per store.
 */
export async function deriveGear(key: Uint8Array): Promise<Uint32Array> {
  if (key.length < 16) throw new ChunkParamsError("a chunker key needs at least 16 bytes");
  const hmac = await crypto.subtle.importKey("raw", key as Uint8Array<ArrayBuffer>, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const table = new Uint32Array(256);
  const msg = new Uint8Array(GEAR_LABEL.length + 1);
  msg.set(GEAR_LABEL);
  for (let block = 0; block < 32; block++) {
    msg[GEAR_LABEL.length] = block;
    const words = new DataView(await crypto.subtle.sign("HMAC", hmac, msg));
    for (let w = 0; w < 8; w++) table[block * 8 + w] = words.getUint32(w * 4, true);
  }
  return table;
}

export class Chunker {
  private readonly g1: Int32Array;
  /** g1 shifted left once: the first byte of a two-byte step. */
  private readonly g2: Int32Array;
  private readonly maskS: number;
  private readonly maskL: number;

  /** @param gear 256 words, from deriveGear (or any fixed table, for tests). */
  constructor(
    readonly params: ChunkParams,
    gear: Uint32Array,
  ) {
    checkChunkParams(params);
    if (gear.length !== 256) throw new ChunkParamsError(`a gear table has 256 entries (got ${gear.length})`);
    this.g1 = new Int32Array(256);
    this.g2 = new Int32Array(256);
    for (let i = 0; i < 256; i++) {
      this.g1[i] = gear[i]! | 0;
      this.g2[i] = (gear[i]! << 1) | 0;
    }
    // Normalised chunking, level 2: harder to cut before avg, easier after.
    const bits = Math.log2(params.avgSize);
    this.maskS = highMask(bits + 2);
    this.maskL = highMask(bits - 2);
  }

  /**
   * The end of the chunk that starts at `start`, looking at data[start, end).
   * Returns a cut in (start, end], or -1 when those bytes do not decide it and
   * more may follow (`final` false): give it at least maxSize bytes, or the
   * rest of the input with `final` true, and it always decides.
   */
  cut(data: Uint8Array, start: number, end: number, final: boolean): number {
    const { minSize, avgSize, maxSize } = this.params;
    const available = end - start;
    if (available <= minSize) return final ? end : -1;
    const n = Math.min(available, maxSize);
    const normal = Math.min(n, avgSize);
    const g1 = this.g1;
    const g2 = this.g2;
    const maskS = this.maskS;
    const maskL = this.maskL;
    const maskS2 = maskS << 1;
    const maskL2 = maskL << 1;
    let h = 0;
    let i = start + minSize;
    // Two bytes per step: h' = (h << 2) + (g[a] << 1) + g[b]. The first test
    // looks at h after byte a, shifted left once, so it uses the shifted mask.
    const endS = start + normal - 1;
    for (; i < endS; i += 2) {
      h = ((h << 2) + g2[data[i]!]!) | 0;
      if ((h & maskS2) === 0) return i + 1;
      h = (h + g1[data[i + 1]!]!) | 0;
      if ((h & maskS) === 0) return i + 2;
    }
    if (i < start + normal) {
      h = ((h << 1) + g1[data[i]!]!) | 0;
      if ((h & maskS) === 0) return i + 1;
      i++;
    }
    const endL = start + n - 1;
    for (; i < endL; i += 2) {
      h = ((h << 2) + g2[data[i]!]!) | 0;
      if ((h & maskL2) === 0) return i + 1;
      h = (h + g1[data[i + 1]!]!) | 0;
      if ((h & maskL) === 0) return i + 2;
    }
    if (i < start + n) {
      h = ((h << 1) + g1[data[i]!]!) | 0;
      if ((h & maskL) === 0) return i + 1;
    }
    if (n === maxSize) return start + maxSize;
    return final ? end : -1;
  }

  /** The chunk lengths of a whole buffer, in order. */
  lengths(data: Uint8Array): number[] {
    const out: number[] = [];
    let start = 0;
    while (start < data.length) {
      const end = this.cut(data, start, data.length, true);
      out.push(end - start);
      start = end;
    }
    return out;
  }

  /**
   * Chunks a stream of byte pieces of any sizes. Yields views into buffers it
   * owns and never reuses, so a chunk stays valid after the next one is asked
   * for. `blockSize` (default 4 × maxSize) is the buffer each refill reads into.
   */
  async *chunks(source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, blockSize = 4 * this.params.maxSize): AsyncGenerator<Uint8Array> {
    const size = Math.max(blockSize, this.params.maxSize);
    let buf = new Uint8Array(size);
    let start = 0;
    let end = 0;
    const drain = function* (this: Chunker, final: boolean): Generator<Uint8Array> {
      while (start < end) {
        const cut = this.cut(buf, start, end, final);
        if (cut < 0) return;
        yield buf.subarray(start, cut);
        start = cut;
      }
    }.bind(this);
    for await (const piece of source) {
      let off = 0;
      while (off < piece.length) {
        if (end === buf.length) {
          // The undecided tail (< maxSize) moves to a fresh buffer; yielded views keep the old one.
          const next = new Uint8Array(size);
          next.set(buf.subarray(start, end));
          end -= start;
          start = 0;
          buf = next;
        }
        const take = Math.min(piece.length - off, buf.length - end);
        buf.set(piece.subarray(off, off + take), end);
        end += take;
        off += take;
        if (end === buf.length) yield* drain(false);
      }
    }
    yield* drain(true);
  }
}
