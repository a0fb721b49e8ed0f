// The host↔guest wire format. Runtime-neutral: Uint8Array and DataView only.
// Documented in guest/PROTOCOL.md; change both together.

export const PROTOCOL_VERSION = 1;

/** Bytes before the payload: length u32, seq u32, type u8, chan u8, stream u32. */
export const HEADER_BYTES = 14;
/** Largest payload either side may send; anything larger is a protocol error. */
export const MAX_PAYLOAD = 256 * 1024;
/** Initial per-stream receive window, in DATA payload bytes. */
export const DEFAULT_WINDOW = 8 * 1024 * 1024;

export const FrameType = {
  hello: 1,
  open: 2,
  data: 3,
  credit: 4,
  eof: 5,
  msg: 6,
  close: 7,
  ping: 8,
  pong: 9,
} as const;
export type FrameTypeName = keyof typeof FrameType;
const TYPE_NAMES = new Map<number, FrameTypeName>(
  Object.entries(FrameType).map(([k, v]) => [v, k as FrameTypeName]),
);

/** Channels inside a stream, as in a process: 0 stdin (host→guest), 1 stdout, 2 stderr. */
export const Chan = { stdin: 0, stdout: 1, stderr: 2 } as const;

export interface Frame {
  type: FrameTypeName;
  stream: number;
  chan: number;
  seq: number;
  payload: Uint8Array;
}

export class ProtocolError extends Error {
  override name = "ProtocolError";
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder("utf-8", { fatal: true });

export function encodeFrame(
  type: FrameTypeName,
  stream: number,
  chan: number,
  seq: number,
  payload: Uint8Array,
): Uint8Array {
  if (payload.length > MAX_PAYLOAD) {
    throw new ProtocolError(`payload of ${payload.length} bytes exceeds the ${MAX_PAYLOAD}-byte cap`);
  }
  const out = new Uint8Array(HEADER_BYTES + payload.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, HEADER_BYTES - 4 + payload.length);
  view.setUint32(4, seq >>> 0);
  view.setUint8(8, FrameType[type]);
  view.setUint8(9, chan);
  view.setUint32(10, stream >>> 0);
  out.set(payload, HEADER_BYTES);
  return out;
}

export function encodeJson(value: unknown): Uint8Array {
  return textEncoder.encode(JSON.stringify(value));
}

/** Parses a JSON payload from the other side; a bad one is a protocol error, never a crash. */
export function decodeJson(payload: Uint8Array): unknown {
  try {
    return JSON.parse(textDecoder.decode(payload));
  } catch (err) {
    throw new ProtocolError(`frame payload is not JSON: ${(err as Error).message}`);
  }
}

export function encodeU32(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n >>> 0);
  return out;
}

export function decodeU32(payload: Uint8Array): number {
  if (payload.length !== 4) throw new ProtocolError(`credit payload must be 4 bytes, got ${payload.length}`);
  return new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0);
}

/**
 * Incremental decoder: feed it bytes as they arrive, get whole frames back.
 * Checks the length cap before buffering a payload, the frame type, and that
 * seq counts up from 0 with no gap, so a dropped, repeated or corrupted byte
 * range is caught at the first frame it touches.
 *
 * Chunks are kept as they came and each frame is copied out at most once (a
 * frame inside one chunk is not copied at all): on the data path this runs
 * for every byte at every hop.
 */
export class FrameDecoder {
  private chunks: Uint8Array[] = [];
  private head = 0; // read offset into chunks[0]
  private buffered = 0;
  private expectSeq = 0;

  push(chunk: Uint8Array): Frame[] {
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const frames: Frame[] = [];
    while (this.buffered >= 4) {
      const len = this.peekU32();
      if (len < HEADER_BYTES - 4 || len - (HEADER_BYTES - 4) > MAX_PAYLOAD) {
        throw new ProtocolError(`frame length ${len} is outside 10..${MAX_PAYLOAD + HEADER_BYTES - 4}`);
      }
      if (this.buffered < 4 + len) break;
      const bytes = this.take(4 + len);
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
      const seq = view.getUint32(4);
      const typeCode = view.getUint8(8);
      const type = TYPE_NAMES.get(typeCode);
      if (!type) throw new ProtocolError(`unknown frame type ${typeCode}`);
      if (seq !== this.expectSeq) {
        throw new ProtocolError(`frame seq ${seq} where ${this.expectSeq} was expected`);
      }
      this.expectSeq = (this.expectSeq + 1) >>> 0;
      frames.push({ type, chan: view.getUint8(9), stream: view.getUint32(10), seq, payload: bytes.subarray(HEADER_BYTES) });
    }
    return frames;
  }

  /** Bytes held waiting for the rest of a frame. */
  get pending(): number {
    return this.buffered;
  }

  private peekU32(): number {
    const first = this.chunks[0]!;
    if (first.length - this.head >= 4) {
      return new DataView(first.buffer, first.byteOffset + this.head, 4).getUint32(0);
    }
    let n = 0;
    let ci = 0;
    let off = this.head;
    for (let i = 0; i < 4; i++) {
      while (off >= this.chunks[ci]!.length) {
        ci++;
        off = 0;
      }
      n = n * 256 + this.chunks[ci]![off++]!;
    }
    return n;
  }

  private take(n: number): Uint8Array {
    this.buffered -= n;
    const first = this.chunks[0]!;
    if (first.length - this.head >= n) {
      const out = first.subarray(this.head, this.head + n);
      this.head += n;
      if (this.head === first.length) {
        this.chunks.shift();
        this.head = 0;
      }
      return out;
    }
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length - this.head, n - filled);
      out.set(c.subarray(this.head, this.head + k), filled);
      filled += k;
      this.head += k;
      if (this.head === c.length) {
        this.chunks.shift();
        this.head = 0;
      }
    }
    return out;
  }
}
