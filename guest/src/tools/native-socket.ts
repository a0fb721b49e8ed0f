// A Bun native TCP socket seen through the few node:net-like calls that
// joinSocket (shared) uses. Native rather than node:net: PID 1 never loads
// node:net and node:stream, which would stay resident for the broker listener.
import type { Socket, TCPSocketListener } from "bun";
import type { JoinableSocket } from "@hutch/shared/wire";

type Event = "data" | "end" | "close" | "error" | "drain";
/** Handlers take the chunk for "data" and nothing otherwise. */
type Handler = ((chunk: Uint8Array) => void) | (() => void);

export class NativeSocket implements JoinableSocket {
  private readonly handlers = new Map<Event, Handler[]>();
  private pending: Uint8Array[] = [];
  private ending = false;
  closed = false;

  constructor(private readonly sock: Socket<NativeSocket>) {}

  on(event: "data", fn: (chunk: Uint8Array) => void): this;
  on(event: "end" | "close" | "error" | "drain", fn: () => void): this;
  on(event: Event, fn: Handler): this {
    this.handlers.set(event, [...(this.handlers.get(event) ?? []), fn]);
    return this;
  }

  once(event: "drain", fn: () => void): this {
    const wrapped = () => {
      this.handlers.set(
        event,
        (this.handlers.get(event) ?? []).filter((h) => h !== wrapped),
      );
      fn();
    };
    return this.on(event, wrapped);
  }

  emit(event: Event, arg?: Uint8Array): void {
    for (const h of this.handlers.get(event) ?? []) (h as (a?: Uint8Array) => void)(arg);
  }

  /** Like node's: true when the kernel took it all; otherwise the rest is queued and "drain" follows. */
  write(bytes: Uint8Array): boolean {
    if (this.closed) return false;
    if (this.pending.length > 0) {
      this.pending.push(bytes.slice());
      return false;
    }
    const n = Math.max(0, this.sock.write(bytes));
    if (n >= bytes.length) return true;
    this.pending.push(bytes.slice(n));
    return false;
  }

  flush(): void {
    while (this.pending.length > 0) {
      const head = this.pending[0]!;
      const n = Math.max(0, this.sock.write(head));
      if (n < head.length) {
        this.pending[0] = head.subarray(n);
        return;
      }
      this.pending.shift();
    }
    if (this.ending) this.sock.end();
    this.emit("drain");
  }

  pause(): void {
    this.sock.pause();
  }

  resume(): void {
    this.sock.resume();
  }

  end(): void {
    if (this.pending.length > 0) this.ending = true;
    else this.sock.end();
  }

  destroy(): void {
    if (this.closed) return;
    this.sock.terminate();
    this.closed = true;
  }
}

/** Listens on 127.0.0.1:port; each connection arrives paused. Throws if the port is taken. */
export function listenLoopback(port: number, arrived: (s: NativeSocket) => void): TCPSocketListener<NativeSocket> {
  return Bun.listen<NativeSocket>({
    hostname: "127.0.0.1",
    port,
    socket: {
      open(sock) {
        sock.data = new NativeSocket(sock);
        sock.pause();
        arrived(sock.data);
      },
      // The chunk is copied: the join may hold it until the host grants credit.
      data: (sock, bytes) => sock.data.emit("data", bytes.slice()),
      drain: (sock) => sock.data.flush(),
      end: (sock) => sock.data.emit("end"),
      close: (sock) => {
        sock.data.closed = true;
        sock.data.emit("close");
      },
      error: (sock) => sock.data.emit("error"),
    },
  });
}
