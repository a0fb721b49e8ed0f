// snap.out's byte stream: a running box's guest walks a root, chunks its
// files the way the store does (the store's gear table and sizes, given for
// the save) and sends one record per entry and per chunk on chan 1. A chunk
// the host said this box already sent is named by its digest, not sent. The
// guest cannot compute a chunk's id in the store (that key stays on the
// host); the digest is HMAC-SHA-256 under a key of this box's own, so the
// answer to "have you got it?" is about this box's earlier snapshots only.
//
// A record is a kind byte, a u32 big-endian length, then the payload:
//   entry  JSON (SnapEntry): a directory before what it holds, a file before its chunks
//   data   a chunk's bytes, sent
//   have   a digest (32 bytes) and a u32 length: a chunk the host was offered
// A file's chunks follow its entry until they add up to its size.
import { type Static, Type } from "@sinclair/typebox";

export const RECORD = { entry: 1, data: 2, have: 3 } as const;
export type RecordKind = (typeof RECORD)[keyof typeof RECORD];
/** Bytes before a record's payload. */
export const RECORD_HEAD = 5;
export const DIGEST_BYTES = 32;
/** The largest entry record: names and link targets are bounded, xattrs are the bulk. */
export const MAX_ENTRY_BYTES = 1024 * 1024;
/** Digests the host offers a box at most (32 bytes each on chan 0 before the walk starts). */
export const MAX_OFFERED = 250_000;

const Decimal = Type.String({ pattern: "^-?[0-9]{1,20}$", rule: "a whole number in decimal" });
const Name = Type.String({ minLength: 1, maxLength: 255 });
const Parts = Type.Array(Name, { maxItems: 4096 });

/** One entry of a walked root; `path` is relative to it ([] is the root itself). */
export const SnapEntry = Type.Object(
  {
    path: Parts,
    type: Type.Union([Type.Literal("dir"), Type.Literal("file"), Type.Literal("symlink"), Type.Literal("hardlink")]),
    /** Permission bits with setuid, setgid and sticky. */
    mode: Type.Integer({ minimum: 0, maximum: 0o7777 }),
    /** ns since the epoch. */
    mtime: Decimal,
    uid: Type.Integer({ minimum: 0, maximum: 0xffffffff }),
    gid: Type.Integer({ minimum: 0, maximum: 0xffffffff }),
    /** file: bytes its chunks add up to. */
    size: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
    /** symlink: its target. */
    target: Type.Optional(Type.String({ minLength: 1, maxLength: 4095 })),
    /** hardlink: the path of a file sent before it with the same inode. */
    linkOf: Type.Optional(Parts),
    /** Extended attributes, [name, base64 value], sorted by name. */
    xattrs: Type.Optional(
      Type.Array(Type.Tuple([Type.String({ minLength: 1, maxLength: 255 }), Type.String({ maxLength: 90_000 })]), { maxItems: 256 }),
    ),
  },
  { additionalProperties: false },
);
export type SnapEntry = Static<typeof SnapEntry>;

const enc = new TextEncoder();

function head(kind: RecordKind, length: number): Uint8Array {
  const h = new Uint8Array(RECORD_HEAD);
  h[0] = kind;
  new DataView(h.buffer).setUint32(1, length);
  return h;
}

export function entryRecord(e: SnapEntry): Uint8Array {
  const body = enc.encode(JSON.stringify(e));
  const out = new Uint8Array(RECORD_HEAD + body.length);
  out.set(head(RECORD.entry, body.length));
  out.set(body, RECORD_HEAD);
  return out;
}

/** A sent chunk: the head, then the bytes as they are (no copy). */
export function dataRecord(chunk: Uint8Array): [Uint8Array, Uint8Array] {
  return [head(RECORD.data, chunk.length), chunk];
}

export function haveRecord(digest: Uint8Array, length: number): Uint8Array {
  const out = new Uint8Array(RECORD_HEAD + DIGEST_BYTES + 4);
  out.set(head(RECORD.have, DIGEST_BYTES + 4));
  out.set(digest, RECORD_HEAD);
  new DataView(out.buffer).setUint32(RECORD_HEAD + DIGEST_BYTES, length);
  return out;
}

export class RecordError extends Error {
  override name = "RecordError";
}

export type SnapRecord = { kind: 1; entry: unknown } | { kind: 2; bytes: Uint8Array } | { kind: 3; digest: Uint8Array; length: number };

/**
 * Cuts a byte stream of any split into records, holding at most one record
 * (`maxData`, the largest chunk, or MAX_ENTRY_BYTES) at a time. The input is
 * untrusted: an unknown kind or an oversized length is refused before it is
 * buffered. Entries come out parsed as JSON but not checked (the caller does).
 */
export class RecordReader {
  private buf = new Uint8Array(0);
  private len = 0;

  constructor(private readonly maxData: number) {}

  *push(piece: Uint8Array): Generator<SnapRecord> {
    this.append(piece);
    let off = 0;
    for (;;) {
      if (this.len - off < RECORD_HEAD) break;
      const kind = this.buf[off]!;
      const length = new DataView(this.buf.buffer, this.buf.byteOffset + off + 1, 4).getUint32(0);
      if (kind === RECORD.entry) {
        if (length > MAX_ENTRY_BYTES) throw new RecordError(`an entry record of ${length} bytes (at most ${MAX_ENTRY_BYTES})`);
      } else if (kind === RECORD.data) {
        if (length === 0 || length > this.maxData) throw new RecordError(`a chunk of ${length} bytes (1..${this.maxData})`);
      } else if (kind === RECORD.have) {
        if (length !== DIGEST_BYTES + 4) throw new RecordError(`a have record of ${length} bytes (${DIGEST_BYTES + 4})`);
      } else throw new RecordError(`a record of unknown kind ${kind}`);
      if (this.len - off < RECORD_HEAD + length) break;
      const body = this.buf.slice(off + RECORD_HEAD, off + RECORD_HEAD + length);
      off += RECORD_HEAD + length;
      if (kind === RECORD.entry) {
        let entry: unknown;
        try {
          entry = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
        } catch {
          throw new RecordError("an entry record that is not UTF-8 JSON");
        }
        yield { kind: RECORD.entry, entry };
      } else if (kind === RECORD.data) yield { kind: RECORD.data, bytes: body };
      else yield { kind: RECORD.have, digest: body.subarray(0, DIGEST_BYTES), length: new DataView(body.buffer).getUint32(DIGEST_BYTES) };
    }
    this.consume(off);
  }

  /** Throws unless the stream ended between records. */
  finish(): void {
    if (this.len > 0) throw new RecordError(`the stream ended inside a record (${this.len} bytes left)`);
  }

  private append(piece: Uint8Array): void {
    if (this.len + piece.length > this.buf.length) {
      const next = new Uint8Array(Math.max(this.len + piece.length, 2 * this.buf.length, 64 * 1024));
      next.set(this.buf.subarray(0, this.len));
      this.buf = next;
    }
    this.buf.set(piece, this.len);
    this.len += piece.length;
  }

  private consume(n: number): void {
    if (n === 0) return;
    this.buf.copyWithin(0, n, this.len);
    this.len -= n;
  }
}
