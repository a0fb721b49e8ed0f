import { describe, expect, test } from "bun:test";
import { Chunker, ChunkParamsError, checkChunkParams, deriveGear, type ChunkParams } from "../src/chunk/index.ts";

const KiB = 1024;
const SMALL: ChunkParams = { minSize: 2 * KiB, avgSize: 8 * KiB, maxSize: 32 * KiB };

/** Deterministic bytes (xorshift32), so cut points are comparable across runs and machines. */
function pseudoRandom(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

function key(byte: number): Uint8Array {
  return new Uint8Array(32).fill(byte);
}

async function chunker(params: ChunkParams, k = key(1)): Promise<Chunker> {
  return new Chunker(params, await deriveGear(k));
}

function cuts(lengths: number[]): number[] {
  const out: number[] = [];
  let at = 0;
  for (const l of lengths) {
    at += l;
    out.push(at);
  }
  return out;
}

describe("checkChunkParams", () => {
  test.each([
    [{ minSize: 512 * KiB, avgSize: 1024 * KiB, maxSize: 4096 * KiB }, null],
    [{ minSize: 2 * KiB, avgSize: 8 * KiB, maxSize: 64 * KiB }, null],
    [{ minSize: 8 * KiB, avgSize: 8 * KiB, maxSize: 64 * KiB }, "min < avg < max"],
    [{ minSize: 2 * KiB, avgSize: 64 * KiB, maxSize: 64 * KiB }, "min < avg < max"],
    [{ minSize: 2 * KiB, avgSize: 9 * KiB, maxSize: 64 * KiB }, "power of two"],
    [{ minSize: 32, avgSize: 8 * KiB, maxSize: 64 * KiB }, "must lie in"],
    [{ minSize: 2 * KiB, avgSize: 8 * KiB, maxSize: 128 * 1024 * KiB }, "must lie in"],
    [{ minSize: 2.5, avgSize: 8 * KiB, maxSize: 64 * KiB }, "positive integers"],
    [{ minSize: -1, avgSize: 8 * KiB, maxSize: 64 * KiB }, "positive integers"],
  ])("%o: %p", (params, problem) => {
    if (problem === null) expect(() => checkChunkParams(params)).not.toThrow();
    else expect(() => checkChunkParams(params)).toThrow(problem);
  });

  test("a bad gear table is refused", () => {
    expect(() => new Chunker(SMALL, new Uint32Array(255))).toThrow(ChunkParamsError);
  });
});

describe("deriveGear", () => {
  test("is a function of the key: same key, same table; another key, another table", async () => {
    const a = await deriveGear(key(1));
    expect(await deriveGear(key(1))).toEqual(a);
    const b = await deriveGear(key(2));
    let same = 0;
    for (let i = 0; i < 256; i++) if (a[i] === b[i]) same++;
    expect(same).toBeLessThan(4);
  });

  test("known answer: the derivation is part of the store format (host and guest must agree)", async () => {
    const g = await deriveGear(key(7));
    expect([g[0], g[1], g[255]]).toEqual(KNOWN_GEAR);
  });

  test("refuses a short key", async () => {
    expect(deriveGear(new Uint8Array(8))).rejects.toThrow("at least 16 bytes");
  });
});

// The gear words were checked against Python's hmac module; the cuts were recorded once from this
// implementation. A change to either changes every chunk id in every store.
const KNOWN_GEAR = [3686517474, 2776218632, 690184520];
const KNOWN_CUTS = [
  8561, 18567, 21675, 32783, 41009, 52330, 59594, 68590, 77831, 84638, 98790, 109304, 118108, 126353, 140438, 150636, 160175, 168405,
  179349, 187552, 196227, 207226, 213515, 219085, 227879, 238362, 249398, 257832, 262144,
];

/** FastCDC as the paper writes it, one byte at a time: what the two-byte loop must agree with. */
function reference(data: Uint8Array, p: ChunkParams, gear: Uint32Array): number[] {
  const bits = Math.log2(p.avgSize);
  const mask = (n: number) => (2 ** n - 1) * 2 ** (31 - n);
  const out: number[] = [];
  let start = 0;
  while (start < data.length) {
    const n = Math.min(data.length - start, p.maxSize);
    let end = start + n;
    if (n > p.minSize) {
      let h = 0;
      for (let i = start + p.minSize; i < start + n; i++) {
        h = (h * 2 + gear[data[i]!]!) % 2 ** 32;
        const m = i < start + Math.min(n, p.avgSize) ? mask(bits + 2) : mask(bits - 2);
        if ((h & m) === 0) {
          end = i + 1;
          break;
        }
      }
    }
    out.push(end - start);
    start = end;
  }
  return out;
}

describe("Chunker", () => {
  test("every chunk but the last is within [min, max], and they cover the input", async () => {
    const c = await chunker(SMALL);
    const data = pseudoRandom(2 * 1024 * KiB, 42);
    const lengths = c.lengths(data);
    expect(lengths.reduce((a, b) => a + b, 0)).toBe(data.length);
    for (const l of lengths.slice(0, -1)) {
      expect(l).toBeGreaterThanOrEqual(SMALL.minSize);
      expect(l).toBeLessThanOrEqual(SMALL.maxSize);
    }
    const mean = data.length / lengths.length;
    expect(mean).toBeGreaterThan(SMALL.avgSize / 2);
    expect(mean).toBeLessThan(SMALL.avgSize * 2);
  });

  test.each([
    ["empty", 0, []],
    ["shorter than min", 100, [100]],
    ["exactly min", SMALL.minSize, [SMALL.minSize]],
  ])("%s input", async (_name, n, want) => {
    const c = await chunker(SMALL);
    expect(c.lengths(pseudoRandom(n, 3))).toEqual(want);
  });

  test("bytes that never cut are cut at max", async () => {
    const c = await chunker(SMALL);
    const lengths = c.lengths(new Uint8Array(100 * KiB));
    // All zeros: the gear hash of a run of one byte value is periodic; it either cuts in a fixed rhythm or at max.
    for (const l of lengths.slice(0, -1)) expect(l).toBeLessThanOrEqual(SMALL.maxSize);
    expect(new Set(lengths.slice(0, -1)).size).toBe(1);
  });

  test("content-defined: bytes inserted near the start leave the later cut points where they were", async () => {
    const c = await chunker(SMALL);
    const data = pseudoRandom(1024 * KiB, 9);
    const edited = new Uint8Array(data.length + 17);
    edited.set(data.subarray(0, 1000));
    edited.set(pseudoRandom(17, 5), 1000);
    edited.set(data.subarray(1000), 1017);
    const before = new Set(cuts(c.lengths(data)).map((x) => x + 17));
    const after = cuts(c.lengths(edited));
    const kept = after.filter((x) => before.has(x)).length;
    expect(kept / after.length).toBeGreaterThan(0.9);
  });

  test("keyed: another store's key cuts the same bytes elsewhere", async () => {
    const data = pseudoRandom(1024 * KiB, 11);
    const a = new Set(cuts((await chunker(SMALL, key(1))).lengths(data)));
    const b = cuts((await chunker(SMALL, key(2))).lengths(data));
    const shared = b.filter((x) => a.has(x)).length - 1; // the end of the input is always a cut
    expect(shared / b.length).toBeLessThan(0.2);
  });

  test("a stream in pieces of any size cuts exactly where the whole buffer does", async () => {
    const c = await chunker(SMALL);
    const data = pseudoRandom(700 * KiB + 13, 21);
    const pieces: Uint8Array[] = [];
    let off = 0;
    let size = 1;
    while (off < data.length) {
      pieces.push(data.subarray(off, off + size));
      off += size;
      size = (size * 7 + 3) % 50_000;
    }
    const streamed: number[] = [];
    const seen: number[] = [];
    for await (const chunk of c.chunks(pieces, SMALL.maxSize)) {
      streamed.push(chunk.length);
      seen.push(chunk[0]!);
    }
    expect(streamed).toEqual(c.lengths(data));
    // Chunks stay valid after later ones were yielded: their first bytes are the data's.
    expect(seen).toEqual(cuts([0, ...streamed.slice(0, -1)]).map((at) => data[at]!));
  });

  test("cut() says -1 until it has max bytes or the end, then decides", async () => {
    const c = await chunker(SMALL);
    const data = new Uint8Array(SMALL.maxSize * 2);
    expect(c.cut(data, 0, SMALL.minSize, false)).toBe(-1);
    expect(c.cut(data, 0, SMALL.minSize, true)).toBe(SMALL.minSize);
    const decided = c.cut(data, 0, data.length, false);
    expect(decided).toBeGreaterThan(SMALL.minSize);
    expect(decided).toBeLessThanOrEqual(SMALL.maxSize);
  });

  test.each([
    ["small chunks", SMALL, 3],
    ["odd sizes", { minSize: 1000, avgSize: 4 * KiB, maxSize: 9999 }, 4],
    ["the store's defaults", { minSize: 512 * KiB, avgSize: 1024 * KiB, maxSize: 4096 * KiB }, 5],
  ])("agrees with the one-byte-at-a-time reference (%s)", async (_name, params, seed) => {
    const gear = await deriveGear(key(seed));
    const data = pseudoRandom(params.maxSize * 6 + 777, seed);
    expect(new Chunker(params, gear).lengths(data)).toEqual(reference(data, params, gear));
  });

  test("known answer: cut points of fixed bytes under a fixed key", async () => {
    const c = await chunker(SMALL, key(7));
    expect(cuts(c.lengths(pseudoRandom(256 * KiB, 1234)))).toEqual(KNOWN_CUTS);
  });
});
