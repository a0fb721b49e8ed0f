// Pull-style reading of a connection for the broker's parser: bytes wait in
// one buffer, and the socket is paused while nobody asks for more, so a box
// that sends faster than the broker forwards is held back by the kernel, not
// by memory.
import type { Conn } from "./conn.ts";
import { concat, headEnd, HttpError, MAX_HEAD } from "./http.ts";

export class SocketReader {
  buf: Uint8Array = new Uint8Array(0);
  private ended = false;
  private wake?: () => void;

  constructor(private readonly conn: Conn) {
    conn.pause();
    conn.onData = (chunk) => {
      this.buf = concat(this.buf, chunk.slice());
      conn.pause();
      this.notify();
    };
    conn.onEnd = () => {
      this.ended = true;
      this.notify();
    };
    conn.onClose(() => {
      this.ended = true;
      this.notify();
    });
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /**
   * Waits for more bytes; false at end of stream. With idleMs (a request
   * body), HttpError 408 when nothing arrives for that long: a total time
   * would cut a large upload on a slow link, an idle time only a stalled one.
   */
  async more(idleMs?: number): Promise<boolean> {
    if (this.ended) return false;
    const arrived = new Promise<void>((resolve) => (this.wake = resolve));
    this.conn.resume();
    if (idleMs === undefined) await arrived;
    else {
      let timer: Timer | undefined;
      const stalled = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), idleMs)));
      const timedOut = await Promise.race([arrived.then(() => false), stalled]);
      clearTimeout(timer);
      if (timedOut) {
        this.wake = undefined;
        this.conn.pause();
        throw new HttpError(
          408,
          `the request body stalled: no byte of it arrived for ${idleMs / 1000} s, so the broker closed the connection; send the whole body right after the head (as many bytes as Content-Length says)`,
        );
      }
    }
    return this.buf.length > 0 || !this.ended;
  }

  /**
   * Resolves when the peer ends or closes the connection (a request held for
   * a person's approval ends its wait then). Reads meanwhile: what arrives is
   * kept for the next request, and pauses the socket again as any read does.
   */
  gone(): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.ended) return resolve();
        this.wake = check;
        this.conn.resume();
      };
      check();
    });
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

  /** Exactly n bytes (n is already bounded by the caller); idleMs as for more(). */
  async exactly(n: number, idleMs?: number): Promise<Uint8Array> {
    while (this.buf.length < n) {
      if (!(await this.more(idleMs))) throw new HttpError(400, "connection closed inside a request body");
    }
    return this.take(n);
  }

  /** Stops parsing: whatever comes next belongs to a tunnel. */
  detach(): Uint8Array {
    this.conn.onData = undefined;
    this.conn.onEnd = undefined;
    const rest = this.buf;
    this.buf = new Uint8Array(0);
    return rest;
  }
}
