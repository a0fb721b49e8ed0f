// The host↔guest wire format. Runtime-neutral: Uint8Array only.
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
const TYPE_NAMES = new Map<number, FrameTypeName>(Object.entries(FrameType).map(([k, v]) => [v, k as FrameTypeName]));

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

/**
 * Writes a frame header into `out` at `at`, for a payload of `payloadLength`
 * bytes that follows it. Plain byte stores: a DataView would make the engine
 * materialize the ArrayBuffer of every buffer it touches, on every frame.
 */
export function writeHeader(
  out: Uint8Array,
  at: number,
  type: FrameTypeName,
  stream: number,
  chan: number,
  seq: number,
  payloadLength: number,
): void {
  if (payloadLength > MAX_PAYLOAD) {
    throw new ProtocolError(`payload of ${payloadLength} bytes exceeds the ${MAX_PAYLOAD}-byte cap`);
  }
  putU32(out, at, HEADER_BYTES - 4 + payloadLength);
  putU32(out, at + 4, seq);
  out[at + 8] = FrameType[type];
  out[at + 9] = chan;
  putU32(out, at + 10, stream);
}

/** A header alone, for a transport that writes it and the payload without joining them. */
export function encodeHeader(type: FrameTypeName, stream: number, chan: number, seq: number, payloadLength: number): Uint8Array {
  const out = new Uint8Array(HEADER_BYTES);
  writeHeader(out, 0, type, stream, chan, seq, payloadLength);
  return out;
}

export function encodeFrame(type: FrameTypeName, stream: number, chan: number, seq: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(HEADER_BYTES + payload.length);
  writeHeader(out, 0, type, stream, chan, seq, payload.length);
  out.set(payload, HEADER_BYTES);
  return out;
}

/**
 * Frames a payload by writing its header into the HEADER_BYTES right in front
 * of it, in the same buffer: a relay passes a decoded frame on by writing the
 * new header over the old one, without copying the payload. The caller must
 * own those bytes. Returns null when the payload has no room in front (the
 * caller then copies with encodeFrame).
 */
export function reframe(type: FrameTypeName, stream: number, chan: number, seq: number, payload: Uint8Array): Uint8Array | null {
  if (payload.byteOffset < HEADER_BYTES) return null;
  const frame = new Uint8Array(payload.buffer, payload.byteOffset - HEADER_BYTES, HEADER_BYTES + payload.length);
  writeHeader(frame, 0, type, stream, chan, seq, payload.length);
  return frame;
}

function putU32(out: Uint8Array, at: number, n: number): void {
  out[at] = n >>> 24;
  out[at + 1] = (n >>> 16) & 0xff;
  out[at + 2] = (n >>> 8) & 0xff;
  out[at + 3] = n & 0xff;
}

function getU32(b: Uint8Array, at: number): number {
  return ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
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
  putU32(out, 0, n >>> 0);
  return out;
}

export function decodeU32(payload: Uint8Array): number {
  if (payload.length !== 4) throw new ProtocolError(`credit payload must be 4 bytes, got ${payload.length}`);
  return getU32(payload, 0);
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
      const seq = getU32(bytes, 4);
      const typeCode = bytes[8]!;
      const type = TYPE_NAMES.get(typeCode);
      if (!type) throw new ProtocolError(`unknown frame type ${typeCode}`);
      if (seq !== this.expectSeq) {
        throw new ProtocolError(`frame seq ${seq} where ${this.expectSeq} was expected`);
      }
      this.expectSeq = (this.expectSeq + 1) >>> 0;
      // The payload keeps its header in front of it: reframe() relies on that.
      frames.push({ type, chan: bytes[9]!, stream: getU32(bytes, 10), seq, payload: bytes.subarray(HEADER_BYTES) });
    }
    return frames;
  }

  /** Bytes held waiting for the rest of a frame. */
  get pending(): number {
    return this.buffered;
  }

  private peekU32(): number {
    const first = this.chunks[0]!;
    if (first.length - this.head >= 4) return getU32(first, this.head);
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
