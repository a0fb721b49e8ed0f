// Pull-style reading of a socket for the broker's parser: bytes wait in one
// buffer, and the socket is paused while nobody asks for more, so a box that
// sends faster than the broker forwards is held back by TCP, not by memory.
import type { Socket } from "node:net";
import { concat, headEnd, HttpError, MAX_HEAD } from "./http.ts";

export class SocketReader {
  buf: Uint8Array = new Uint8Array(0);
  private ended = false;
  private wake?: () => void;

  constructor(private readonly sock: Socket) {
    sock.pause();
    sock.on("data", (chunk: Buffer) => {
      this.buf = concat(this.buf, new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
      sock.pause();
      this.notify();
    });
    sock.on("end", () => {
      this.ended = true;
      this.notify();
    });
    sock.on("close", () => {
      this.ended = true;
      this.notify();
    });
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Waits for more bytes; false at end of stream. */
  async more(): Promise<boolean> {
    if (this.ended) return false;
    const arrived = new Promise<void>((resolve) => (this.wake = resolve));
    this.sock.resume();
    await arrived;
    return this.buf.length > 0 || !this.ended;
  }

  take(n: number): Uint8Array {
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** The next request head, or null when the peer closed between requests. */
  async head(): Promise<Uint8Array | null> {
    for (;;) {
      const end = headEnd(this.buf);
      if (end > MAX_HEAD || (end < 0 && this.buf.length > MAX_HEAD)) throw new HttpError(431, `request head larger than ${MAX_HEAD} bytes`);
      if (end >= 0) return this.take(end);
      const before = this.buf.length;
      if (!(await this.more())) {
        if (before === 0 && this.buf.length === 0) return null;
        throw new HttpError(400, "connection closed inside a request head");
      }
    }
  }

  /** Exactly n bytes (n is already bounded by the caller). */
  async exactly(n: number): Promise<Uint8Array> {
    while (this.buf.length < n) {
      if (!(await this.more())) throw new HttpError(400, "connection closed inside a request body");
    }
    return this.take(n);
  }

  /** Stops parsing: whatever comes next belongs to a tunnel. */
  detach(): Uint8Array {
    this.sock.removeAllListeners("data");
    this.sock.removeAllListeners("end");
    const rest = this.buf;
    this.buf = new Uint8Array(0);
    return rest;
  }
}
