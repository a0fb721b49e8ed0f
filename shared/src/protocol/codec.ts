// The host↔guest wire format. Runtime-neutral: Uint8Array and DataView only.
// Documented in guest/PROTOCOL.md; change both together.

export const PROTOCOL_VERSION = 1;

/** Bytes before the payload: length u32, seq u32, type u8, chan u8, stream u32. */
export const HEADER_BYTES = 14;
/** Largest payload either side may send; anything larger is a protocol error. */
export const MAX_PAYLOAD = 256 * 1024;
/** Initial per-stream receive window, in DATA payload bytes. */
export const DEFAULT_WINDOW = 2 * 1024 * 1024;

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
 */
export class FrameDecoder {
  private buf: Uint8Array = new Uint8Array(0);
  private expectSeq = 0;

  push(chunk: Uint8Array): Frame[] {
    this.buf = this.buf.length === 0 ? chunk : concat(this.buf, chunk);
    const frames: Frame[] = [];
    let off = 0;
    while (this.buf.length - off >= 4) {
      const view = new DataView(this.buf.buffer, this.buf.byteOffset + off);
      const len = view.getUint32(0);
      if (len < HEADER_BYTES - 4 || len - (HEADER_BYTES - 4) > MAX_PAYLOAD) {
        throw new ProtocolError(`frame length ${len} is outside 10..${MAX_PAYLOAD + HEADER_BYTES - 4}`);
      }
      if (this.buf.length - off < 4 + len) break;
      const seq = view.getUint32(4);
      const typeCode = view.getUint8(8);
      const type = TYPE_NAMES.get(typeCode);
      if (!type) throw new ProtocolError(`unknown frame type ${typeCode}`);
      if (seq !== this.expectSeq) {
        throw new ProtocolError(`frame seq ${seq} where ${this.expectSeq} was expected`);
      }
      this.expectSeq = (this.expectSeq + 1) >>> 0;
      frames.push({
        type,
        chan: view.getUint8(9),
        stream: view.getUint32(10),
        seq,
        payload: this.buf.slice(off + HEADER_BYTES, off + 4 + len),
      });
      off += 4 + len;
    }
    this.buf = off === 0 ? this.buf : this.buf.slice(off);
    return frames;
  }

  /** Bytes held waiting for the rest of a frame. */
  get pending(): number {
    return this.buf.length;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
