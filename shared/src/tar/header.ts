// The 512-byte ustar header block and pax extended-header records (POSIX.1-2001
// "pax" interchange format), plus the GNU variants real GNU tar writes by default.
import { TarError } from "./error.ts";

export const BLOCK = 512;
/** Largest value an 11-digit octal field holds (8 GiB - 1); beyond it we need pax. */
export const MAX_OCTAL_11 = 0o77777777777;

const encoder = new TextEncoder();
// Not fatal: a name that is not valid UTF-8 still extracts, with U+FFFD in place
// of the bad bytes, rather than failing a whole copy over one odd file name.
const decoder = new TextDecoder("utf-8");

export const utf8 = (s: string): Uint8Array => encoder.encode(s);

/** Field offsets and widths from POSIX ustar. */
const F = {
  name: [0, 100],
  mode: [100, 8],
  uid: [108, 8],
  gid: [116, 8],
  size: [124, 12],
  mtime: [136, 12],
  chksum: [148, 8],
  typeflag: [156, 1],
  linkname: [157, 100],
  magic: [257, 6],
  version: [263, 2],
  devmajor: [329, 8],
  devminor: [337, 8],
  prefix: [345, 155],
} as const satisfies Record<string, readonly [number, number]>;

export interface HeaderInput {
  /** Already encoded and at most 100 bytes; longer names travel in a pax record. */
  name: Uint8Array;
  linkname?: Uint8Array;
  mode: number;
  size: number;
  mtime: number;
  typeflag: string;
}

function writeOctal(block: Uint8Array, [off, width]: readonly [number, number], value: number): void {
  const digits = value.toString(8).padStart(width - 1, "0");
  if (digits.length > width - 1) throw new TarError(`value ${value} does not fit a ${width}-byte header field`);
  block.set(utf8(digits), off);
  block[off + width - 1] = 0;
}

function writeBytes(block: Uint8Array, [off, width]: readonly [number, number], bytes: Uint8Array): void {
  if (bytes.length > width) throw new TarError(`header field of ${width} bytes cannot hold ${bytes.length} bytes`);
  block.set(bytes, off);
}

export function encodeHeader(h: HeaderInput): Uint8Array {
  const block = new Uint8Array(BLOCK);
  writeBytes(block, F.name, h.name);
  writeOctal(block, F.mode, h.mode);
  // Ownership is never carried: the receiving side runs as some other user anyway.
  writeOctal(block, F.uid, 0);
  writeOctal(block, F.gid, 0);
  writeOctal(block, F.size, h.size);
  writeOctal(block, F.mtime, h.mtime);
  writeBytes(block, F.typeflag, utf8(h.typeflag));
  if (h.linkname) writeBytes(block, F.linkname, h.linkname);
  writeBytes(block, F.magic, utf8("ustar\0"));
  writeBytes(block, F.version, utf8("00"));
  writeOctal(block, F.devmajor, 0);
  writeOctal(block, F.devminor, 0);
  const sum = checksum(block);
  // Six digits, NUL, space: the layout every tar since V7 writes.
  block.set(utf8(sum.toString(8).padStart(6, "0")), F.chksum[0]);
  block[F.chksum[0] + 6] = 0;
  block[F.chksum[0] + 7] = 0x20;
  return block;
}

/** Unsigned byte sum with the checksum field counted as spaces. */
function checksum(block: Uint8Array, signed = false): number {
  let sum = 0;
  const [off, width] = F.chksum;
  for (let i = 0; i < BLOCK; i++) {
    const b = i >= off && i < off + width ? 0x20 : (block[i] ?? 0);
    sum += signed && b > 127 ? b - 256 : b;
  }
  return sum;
}

export function isZeroBlock(block: Uint8Array): boolean {
  for (let i = 0; i < BLOCK; i++) if (block[i] !== 0) return false;
  return true;
}

function field(block: Uint8Array, [off, width]: readonly [number, number]): Uint8Array {
  return block.subarray(off, off + width);
}

/** Text up to the first NUL. */
function readString(block: Uint8Array, f: readonly [number, number]): string {
  const bytes = field(block, f);
  const end = bytes.indexOf(0);
  return decoder.decode(end < 0 ? bytes : bytes.subarray(0, end));
}

/** Octal with optional space/NUL padding, or GNU base-256 when the top bit is set. */
function readNumber(block: Uint8Array, f: readonly [number, number], what: string, where: string): number {
  const bytes = field(block, f);
  const first = bytes[0] ?? 0;
  if (first & 0x80) {
    // Base-256: big-endian two's complement; 0xff lead means negative.
    let v = BigInt(first & 0x7f) - (first === 0xff ? 128n : 0n);
    for (let i = 1; i < bytes.length; i++) v = (v << 8n) | BigInt(bytes[i] ?? 0);
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new TarError(`${where}: ${what} field is out of range`);
    }
    return Number(v);
  }
  const text = decoder.decode(bytes).replace(/^[ \0]+|[ \0]+$/g, "");
  if (text === "") return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarError(`${where}: ${what} field "${text}" is not an octal number`);
  return parseInt(text, 8);
}

export interface RawHeader {
  name: string;
  linkname: string;
  mode: number;
  size: number;
  mtime: number;
  typeflag: string;
}

/** Decodes one non-zero header block; `where` locates it for error messages. */
export function decodeHeader(block: Uint8Array, where: string): RawHeader {
  const stored = readNumber(block, F.chksum, "checksum", where);
  // Some historic writers summed signed bytes; accept either, as GNU tar does.
  if (stored !== checksum(block) && stored !== checksum(block, true)) {
    throw new TarError(`${where}: header checksum mismatch (damaged or not a tar archive)`);
  }
  const size = readNumber(block, F.size, "size", where);
  if (size < 0) throw new TarError(`${where}: negative size`);
  let name = readString(block, F.name);
  // Only POSIX ustar has a prefix field; GNU tar keeps atime/ctime in those bytes.
  const magic = decoder.decode(field(block, F.magic));
  const version = decoder.decode(field(block, F.version));
  if (magic === "ustar\0" && version === "00") {
    const prefix = readString(block, F.prefix);
    if (prefix) name = `${prefix}/${name}`;
  }
  const flag = block[F.typeflag[0]] ?? 0;
  return {
    name,
    linkname: readString(block, F.linkname),
    mode: readNumber(block, F.mode, "mode", where),
    size,
    mtime: readNumber(block, F.mtime, "mtime", where),
    typeflag: flag === 0 ? "0" : String.fromCharCode(flag),
  };
}

/** One pax record: "<len> <key>=<value>\n", where len counts the whole record. */
export function paxRecord(key: string, value: string): Uint8Array {
  const body = utf8(` ${key}=${value}\n`).length;
  let len = body + String(body).length;
  // Adding digits can add a digit (e.g. 98 + 2 -> 100); settle on the fixed point.
  while (String(len).length + body !== len) len = String(len).length + body;
  return utf8(`${len} ${key}=${value}\n`);
}

/**
 * Parses a pax extended header body, keeping only `keep` keys so a stream of
 * headers cannot grow memory with unrelated attributes.
 */
export function parsePax(body: Uint8Array, keep: ReadonlySet<string> | ((key: string) => boolean), where: string): Map<string, string> {
  const wanted = typeof keep === "function" ? keep : (k: string) => keep.has(k);
  const out = new Map<string, string>();
  let pos = 0;
  while (pos < body.length) {
    // Some writers pad the body with NULs after the last record.
    if (body[pos] === 0) break;
    const space = body.indexOf(0x20, pos);
    const lenText = space < 0 ? "" : decoder.decode(body.subarray(pos, space));
    if (!/^[0-9]{1,8}$/.test(lenText)) throw new TarError(`${where}: malformed pax record length`);
    const len = parseInt(lenText, 10);
    const end = pos + len;
    if (end > body.length || end <= space + 1 || body[end - 1] !== 0x0a) {
      throw new TarError(`${where}: malformed pax record`);
    }
    const record = body.subarray(space + 1, end - 1);
    const eq = record.indexOf(0x3d);
    if (eq <= 0) throw new TarError(`${where}: pax record without key=value`);
    const key = decoder.decode(record.subarray(0, eq));
    if (wanted(key)) out.set(key, decoder.decode(record.subarray(eq + 1)));
    pos = end;
  }
  return out;
}
