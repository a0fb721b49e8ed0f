// Bun's native sockets for the gate, wrapped with what the broker needs:
// writes that keep the unwritten remainder in order and tell when it drained,
// pause and resume, and one place that learns about data, end and close.
// Native sockets because every byte of a tunnel passes here: node:net in Bun
// measured ~60 % of direct loopback throughput as a proxy, these ~80 %.
import type { Socket } from "bun";

export class Conn {
  /** Receives each chunk as it arrives (the reader while parsing, the peer in a tunnel). */
  onData?: (bytes: Uint8Array) => void;
  onEnd?: () => void;
  private readonly closeHooks: (() => void)[] = [];
  private pending: Uint8Array[] = [];
  private drainWaiters: ((ok: boolean) => void)[] = [];
  /** What arrived while nobody listened (between parsing and a tunnel); the socket is paused meanwhile. */
  private held: Uint8Array[] = [];
  /** Resumed when this socket drains (a tunnel's other side, paused while this one is full). */
  private resumeOnDrain?: Conn;
  closed = false;
  bytesIn = 0;
  bytesOut = 0;

  constructor(readonly sock: Socket<Conn>) {}

  /** Writes all of bytes eventually; false when some had to wait (then drained() says when they left). */
  write(bytes: Uint8Array | string): boolean {
    if (this.closed) return false;
    const data = typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes;
    if (this.pending.length > 0) {
      this.pending.push(data.slice());
      return false;
    }
    const n = this.sock.write(data);
    this.bytesOut += Math.max(0, n);
    if (n >= data.length) return true;
    // Bun does not keep what it did not write: the rest is ours to send on drain.
    this.pending.push(data.slice(Math.max(0, n)));
    return false;
  }

  drained(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.pending.length === 0) return Promise.resolve(true);
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Tunnel mode: everything this receives goes to `to`, paused while `to` is full. */
  pipeTo(to: Conn): void {
    this.onData = (bytes) => {
      if (!to.write(bytes)) {
        this.sock.pause();
        to.resumeOnDrain = this;
      }
    };
    this.onEnd = () => to.end();
  }

  pause(): void {
    this.sock.pause();
  }

  resume(): void {
    this.sock.resume();
  }

  end(): void {
    if (this.closed) return;
    if (this.pending.length === 0) this.sock.end();
    else void this.drained().then((ok) => ok && this.sock.end());
  }

  get holds(): boolean {
    return this.held.length > 0;
  }

  /** Bytes that arrived with no one listening, handed over once. */
  takeHeld(): Uint8Array[] {
    return this.held.splice(0);
  }

  /** The socket's fd (Bun has it but does not type it), or -1. */
  get fd(): number {
    const fd = (this.sock as unknown as { fd?: unknown }).fd;
    return typeof fd === "number" && !this.closed ? fd : -1;
  }

  destroy(): void {
    if (this.closed) return;
    this.sock.terminate();
    this.handleClose();
  }

  onClose(hook: () => void): void {
    if (this.closed) hook();
    else this.closeHooks.push(hook);
  }

  offClose(hook: () => void): void {
    const i = this.closeHooks.indexOf(hook);
    if (i >= 0) this.closeHooks.splice(i, 1);
  }

  // Socket handlers (wired once in handlers below).

  handleData(bytes: Uint8Array): void {
    this.bytesIn += bytes.length;
    if (this.onData) return this.onData(bytes);
    this.held.push(bytes.slice());
    this.sock.pause();
  }

  handleDrain(): void {
    while (this.pending.length > 0) {
      const head = this.pending[0]!;
      const n = this.sock.write(head);
      this.bytesOut += Math.max(0, n);
      if (n < head.length) {
        this.pending[0] = head.subarray(Math.max(0, n));
        return;
      }
      this.pending.shift();
    }
    for (const w of this.drainWaiters.splice(0)) w(true);
    const r = this.resumeOnDrain;
    this.resumeOnDrain = undefined;
    r?.resume();
  }

  handleClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.pending = [];
    for (const w of this.drainWaiters.splice(0)) w(false);
    for (const h of this.closeHooks.splice(0)) h();
  }
}

/** The handlers every gate socket (accepted or dialled) uses: they forward to the socket's Conn. */
export function handlers(onOpen?: (c: Conn) => void) {
  return {
    open(sock: Socket<Conn>) {
      sock.data = new Conn(sock);
      onOpen?.(sock.data);
    },
    data(sock: Socket<Conn>, bytes: Uint8Array) {
      sock.data.handleData(bytes);
    },
    drain(sock: Socket<Conn>) {
      sock.data.handleDrain();
    },
    end(sock: Socket<Conn>) {
      sock.data.onEnd?.();
    },
    close(sock: Socket<Conn>) {
      sock.data?.handleClose();
    },
    error(sock: Socket<Conn>) {
      sock.data?.destroy();
    },
  };
}
