// Writes to a Bun socket without losing bytes: socket.write takes what the
// kernel accepts and returns the count; the rest waits here for drain().

/** What the writer writes to: a Bun socket, or the virtio port's writer. write() returns the bytes taken. */
export interface ByteSink {
  write(bytes: Uint8Array): number;
  end(): unknown;
}

export class SocketWriter {
  private queue: Uint8Array[] = [];
  private ended = false;

  constructor(private readonly socket: ByteSink) {}

  /** Bytes waiting for the socket. */
  get queued(): number {
    let n = 0;
    for (const b of this.queue) n += b.length;
    return n;
  }

  /** Writes a buffer the caller hands over: it will not touch it again, so an unwritten tail is kept without a copy. */
  write(bytes: Uint8Array): void {
    if (this.ended) return;
    if (this.queue.length > 0) {
      this.queue.push(bytes);
      return;
    }
    const n = this.socket.write(bytes);
    if (n < bytes.length) this.queue.push(bytes.subarray(Math.max(n, 0)));
  }

  /**
   * Writes a frame header (handed over) and its payload (still the caller's,
   * so whatever the socket does not take now is copied) one after the other.
   */
  writeParts(header: Uint8Array, payload: Uint8Array): void {
    if (this.ended) return;
    if (this.queue.length === 0) {
      const n = this.socket.write(header);
      if (n < header.length) this.queue.push(header.subarray(Math.max(n, 0)));
    } else this.queue.push(header);
    if (this.queue.length > 0) {
      this.queue.push(payload.slice());
      return;
    }
    const n = this.socket.write(payload);
    if (n < payload.length) this.queue.push(payload.slice(Math.max(n, 0)));
  }

  /** The socket can take more: flush the queue in order. */
  drain(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const n = this.socket.write(head);
      if (n < head.length) {
        this.queue[0] = head.subarray(Math.max(n, 0));
        return;
      }
      this.queue.shift();
    }
  }

  end(): void {
    this.ended = true;
    this.queue = [];
    this.socket.end();
  }

  /** The socket is gone: drop what it will never take. */
  discard(): void {
    this.ended = true;
    this.queue = [];
  }
}
