// The HTTP/1.1 the broker reads from a box: request heads and request bodies.
// All of it is untrusted, so the limits come first and anything ambiguous
// (bare CR or LF, folded headers, two lengths) is refused, never guessed at.

/** Header blocks larger than this are refused with 431. */
export const MAX_HEAD = 32 * 1024;
const MAX_HEADERS = 128;
/** Request bodies the broker holds to forward with a length; larger ones are refused with 413. */
export const MAX_BODY = 64 * 1024 * 1024;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface RequestHead {
  method: string;
  target: string;
  version: string;
  /** In arrival order, names as sent. */
  headers: [string, string][];
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REQUEST_LINE = /^([A-Z]{1,16}) ([!-~]{1,8192}) (HTTP\/1\.[01])$/;

/** Index just past the blank line ending the head, or -1 while incomplete. */
export function headEnd(buf: Uint8Array): number {
  for (let i = 3; i < buf.length; i++) {
    if (buf[i] === 10 && buf[i - 1] === 13 && buf[i - 2] === 10 && buf[i - 3] === 13) return i + 1;
  }
  return -1;
}

export function parseHead(bytes: Uint8Array): RequestHead {
  const text = new TextDecoder("latin1").decode(bytes);
  const lines = text.slice(0, -4).split("\r\n");
  for (const line of lines) {
    if (line.includes("\r") || line.includes("\n")) throw new HttpError(400, "bare CR or LF inside the request head");
    if (line.includes("\0")) throw new HttpError(400, "NUL inside the request head");
  }
  const m = REQUEST_LINE.exec(lines[0] ?? "");
  if (!m) throw new HttpError(400, `malformed request line ${JSON.stringify((lines[0] ?? "").slice(0, 80))}`);
  if (lines.length - 1 > MAX_HEADERS) throw new HttpError(431, `more than ${MAX_HEADERS} headers`);
  const headers: [string, string][] = [];
  for (const line of lines.slice(1)) {
    if (line.startsWith(" ") || line.startsWith("\t")) throw new HttpError(400, "folded header lines are not accepted");
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!TOKEN.test(name)) throw new HttpError(400, `malformed header line ${JSON.stringify(line.slice(0, 80))}`);
    headers.push([name, line.slice(colon + 1).trim()]);
  }
  return { method: m[1]!, target: m[2]!, version: m[3]!, headers };
}

export function header(head: RequestHead, name: string): string | undefined {
  const lower = name.toLowerCase();
  return head.headers.find(([n]) => n.toLowerCase() === lower)?.[1];
}

/** How the body is framed: a length, chunked, or none. Ambiguity is refused (request smuggling). */
export function bodyFraming(head: RequestHead): { kind: "length"; length: number } | { kind: "chunked" } {
  const lengths = head.headers.filter(([n]) => n.toLowerCase() === "content-length").map(([, v]) => v);
  const te = head.headers.filter(([n]) => n.toLowerCase() === "transfer-encoding").map(([, v]) => v.toLowerCase());
  if (te.length > 0) {
    if (lengths.length > 0) throw new HttpError(400, "both Content-Length and Transfer-Encoding");
    if (te.length !== 1 || te[0] !== "chunked") throw new HttpError(501, `Transfer-Encoding ${te.join(", ")} is not supported`);
    return { kind: "chunked" };
  }
  if (lengths.length === 0) return { kind: "length", length: 0 };
  if (new Set(lengths).size !== 1 || !/^[0-9]{1,15}$/.test(lengths[0]!)) throw new HttpError(400, "invalid Content-Length");
  const length = Number(lengths[0]);
  if (length > MAX_BODY) throw new HttpError(413, `request body of ${length} bytes is over the broker's ${MAX_BODY}`);
  return { kind: "length", length };
}

/**
 * Decodes a chunked body incrementally. feed() returns the bytes of the body
 * it could decode and whether the body ended; what follows the end is left in rest().
 */
export class ChunkedDecoder {
  private buf: Uint8Array = new Uint8Array(0);
  private remaining = -1;
  private done = false;
  private total = 0;

  feed(chunk: Uint8Array): { body: Uint8Array[]; done: boolean } {
    this.buf = concat(this.buf, chunk);
    const body: Uint8Array[] = [];
    while (!this.done) {
      if (this.remaining > 0) {
        if (this.buf.length === 0) break;
        const n = Math.min(this.remaining, this.buf.length);
        body.push(this.buf.subarray(0, n));
        this.buf = this.buf.subarray(n);
        this.remaining -= n;
        continue;
      }
      const eol = indexOfCrlf(this.buf);
      if (eol < 0) {
        if (this.buf.length > 1024) throw new HttpError(400, "chunk size line too long");
        break;
      }
      const line = new TextDecoder("latin1").decode(this.buf.subarray(0, eol));
      this.buf = this.buf.subarray(eol + 2);
      if (this.remaining === 0) {
        // The CRLF that ends a chunk's data.
        if (line !== "") throw new HttpError(400, "chunk data longer than its size");
        this.remaining = -1;
        continue;
      }
      if (this.remaining === -2) {
        // Trailers, up to the blank line.
        if (line === "") this.done = true;
        continue;
      }
      const m = /^([0-9a-fA-F]{1,8})(;.*)?$/.exec(line);
      if (!m) throw new HttpError(400, "malformed chunk size");
      const size = parseInt(m[1]!, 16);
      this.total += size;
      if (this.total > MAX_BODY) throw new HttpError(413, `request body is over the broker's ${MAX_BODY} bytes`);
      this.remaining = size === 0 ? -2 : size;
      if (size > 0) continue;
    }
    return { body, done: this.done };
  }

  rest(): Uint8Array {
    return this.buf;
  }
}

function indexOfCrlf(buf: Uint8Array): number {
  for (let i = 1; i < buf.length; i++) if (buf[i] === 10 && buf[i - 1] === 13) return i - 1;
  return -1;
}

export function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

const REASONS: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  411: "Length Required",
  413: "Content Too Large",
  431: "Request Header Fields Too Large",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

export function reason(status: number): string {
  return REASONS[status] ?? "Status";
}

/** A short plain-text answer from the broker itself. */
export function brokerResponse(status: number, message: string, close: boolean): Uint8Array {
  const body = `hutch broker: ${message}\n`;
  return new TextEncoder().encode(
    `HTTP/1.1 ${status} ${reason(status)}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-hutch-broker: ${status < 400 ? "ok" : "refused"}\r\n${close ? "connection: close\r\n" : ""}\r\n${body}`,
  );
}
