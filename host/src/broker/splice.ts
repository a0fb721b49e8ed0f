// CONNECT tunnels copied by the kernel. Once the gate has answered 200, a
// tunnel's bytes are no business of the broker: splice(2) moves them from one
// socket into a pipe and from the pipe into the other socket, so they never
// enter JavaScript. Through Bun's sockets every chunk costs a callback, a
// copy in and a copy out, and the gate moved ~500 MiB/s against ~1,300 direct.
//
// One worker thread serves every tunnel of every gate: an edge-triggered epoll
// loop over the two sockets of each tunnel, with an eventfd the main thread
// writes to when it hands over a tunnel or cuts one. The gate hands over dup()s
// of its two sockets and closes Bun's own (Bun's terminate closes its fd and
// leaves the connection to the dup; it sets SO_LINGER to reset on close,
// which is undone here so a tunnel still ends with a FIN).
//
// Linux only (splice, epoll, eventfd); where this does not load, the gate
// copies in JavaScript (conn.ts pipeTo).
import { dlopen, FFIType } from "bun:ffi";
import type { Conn } from "./conn.ts";

export interface SpliceResult {
  /** Bytes from the box's side to the upstream, and back. */
  up: number;
  down: number;
  /** Why the tunnel ended other than by both sides closing (a reset, the gate closing). */
  error?: string;
}

type ToWorker =
  | { type: "init"; ctl: Int32Array; wake: number }
  | { type: "join"; id: number; a: number; b: number }
  | { type: "cut"; ids: number[] };
type FromWorker = { type: "done"; id: number; up: number; down: number; error?: string } | { type: "failed"; error: string };

const F_DUPFD_CLOEXEC = 1030;
const EFD_CLOEXEC = 0o2000000;
const EFD_NONBLOCK = 0o4000;
const SOL_SOCKET = 1;
const SO_LINGER = 13;

function openLibc() {
  const { i32, u32, u64, ptr } = FFIType;
  return dlopen("libc.so.6", {
    fcntl: { args: [i32, i32, i32], returns: i32 },
    eventfd: { args: [u32, i32], returns: i32 },
    write: { args: [i32, ptr, u64], returns: i32 },
    close: { args: [i32], returns: i32 },
    setsockopt: { args: [i32, i32, i32, ptr, u32], returns: i32 },
  }).symbols;
}

export class Splicer {
  private readonly pending = new Map<number, { a: number; b: number; resolve: (r: SpliceResult) => void }>();
  private readonly ctl = new Int32Array(new SharedArrayBuffer(4));
  private readonly one = new BigUint64Array([1n]);
  private nextId = 1;
  private broken?: string;

  /** True once the worker has died: new tunnels are then copied in JavaScript. */
  get failed(): boolean {
    return this.broken !== undefined;
  }

  private constructor(
    private readonly libc: ReturnType<typeof openLibc>,
    private readonly worker: Worker,
    private readonly wake: number,
  ) {
    worker.unref();
    worker.onmessage = (e: MessageEvent<FromWorker>) => {
      const m = e.data;
      if (m.type === "failed") return this.fail(m.error);
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      p.resolve({ up: m.up, down: m.down, ...(m.error ? { error: m.error } : {}) });
    };
    worker.onerror = (e) => this.fail(e.message);
    this.send({ type: "init", ctl: this.ctl, wake });
  }

  /** The kernel copy path, or null where it cannot load (not Linux, no glibc, no worker). */
  static start(): Splicer | null {
    if (process.platform !== "linux") return null;
    try {
      const libc = openLibc();
      const wake = libc.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (wake < 0) return null;
      const url = URL.createObjectURL(new Blob([`(${spliceWorker.toString()})()`], { type: "application/javascript" }));
      return new Splicer(libc, new Worker(url), wake);
    } catch {
      return null;
    }
  }

  /**
   * Takes the connection from Bun: a duplicate of its fd (close-on-exec), then
   * Bun's socket closed, which leaves the connection to the duplicate. -1 when
   * there is nothing to take (the caller keeps copying in JavaScript).
   */
  take(conn: Conn): number {
    const fd = conn.fd;
    if (fd < 0) return -1;
    const copy = this.libc.fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return -1;
    conn.destroy();
    // Bun's terminate asked for a reset on close; the tunnel ends with a FIN like any other.
    this.libc.setsockopt(copy, SOL_SOCKET, SO_LINGER, new Int32Array([0, 0]), 8);
    return copy;
  }

  /** Closes an fd this process got from take() and could not hand over. */
  drop(fd: number): void {
    this.libc.close(fd);
  }

  /** Copies between a and b until both sides have closed; owns (and closes) both fds from now on. */
  join(a: number, b: number): { id: number; done: Promise<SpliceResult> } {
    const id = this.nextId++;
    if (this.broken) {
      this.libc.close(a);
      this.libc.close(b);
      return { id, done: Promise.resolve({ up: 0, down: 0, error: this.broken }) };
    }
    const done = new Promise<SpliceResult>((resolve) => this.pending.set(id, { a, b, resolve }));
    this.send({ type: "join", id, a, b });
    return { id, done };
  }

  /** Ends these tunnels now (their gate closed). */
  cut(ids: number[]): void {
    if (ids.length > 0 && !this.broken) this.send({ type: "cut", ids });
  }

  private send(m: ToWorker): void {
    // The count goes first: the worker, woken by the eventfd, waits until it has seen this many messages.
    if (m.type !== "init") Atomics.add(this.ctl, 0, 1);
    this.worker.postMessage(m);
    if (m.type !== "init") this.libc.write(this.wake, this.one, 8);
  }

  /** The worker died: its fds would leak and its tunnels hang, so close them here. */
  private fail(error: string): void {
    if (this.broken) return;
    this.broken = `the tunnel copier failed: ${error}`;
    for (const [id, p] of this.pending) {
      this.libc.close(p.a);
      this.libc.close(p.b);
      p.resolve({ up: 0, down: 0, error: this.broken });
      this.pending.delete(id);
    }
    this.worker.terminate();
  }
}

let shared: Splicer | null | undefined;

/** The one splicer of this process, started with the first tunnel; null where it does not load. */
export function splicer(): Splicer | null {
  if (shared === undefined) shared = Splicer.start();
  return shared?.failed ? null : shared;
}

/**
 * The worker's whole program. It runs from its source text (a Blob URL), so it
 * must reference nothing outside itself; bun:ffi is imported by a computed
 * name for the same reason (the bundler would rewrite a literal one).
 */
function spliceWorker(): void {
  const EAGAIN = 11;
  const EINTR = 4;
  const EPOLL_CTL_ADD = 1;
  const EPOLLIN = 0x1;
  const EPOLLOUT = 0x4;
  const EPOLLRDHUP = 0x2000;
  const EPOLLET = 0x80000000;
  const O_NONBLOCK = 0o4000;
  const O_CLOEXEC = 0o2000000;
  const F_SETPIPE_SZ = 1031;
  const F_GETPIPE_SZ = 1032;
  const SPLICE_F_MOVE = 1;
  const SPLICE_F_NONBLOCK = 2;
  const SHUT_WR = 1;
  const PIPE_BYTES = 1024 * 1024;
  const ERRNO_NAMES: Record<number, string> = { 32: "EPIPE", 104: "ECONNRESET", 110: "ETIMEDOUT", 113: "EHOSTUNREACH", 9: "EBADF" };
  // struct epoll_event is packed on x86-64 (12 bytes) and naturally aligned elsewhere (16).
  const STRIDE = process.arch === "x64" ? 12 : 16;
  const DATA = process.arch === "x64" ? 4 : 8;
  const MAX_EVENTS = 64;

  interface Dir {
    from: number;
    to: number;
    pr: number;
    pw: number;
    cap: number;
    inPipe: number;
    eof: boolean;
    shut: boolean;
    total: number;
  }
  interface Tunnel {
    id: number;
    a: number;
    b: number;
    up: Dir;
    down: Dir;
  }

  // Listening starts now, before the first await: a message that arrived with no listener would be lost.
  const inbox: ToWorker[] = [];
  let handle: ((m: ToWorker) => void) | undefined;
  addEventListener("message", (e: MessageEvent<ToWorker>) => (handle ? handle(e.data) : inbox.push(e.data)));

  void (async () => {
    const ffi = (await import(["bun", "ffi"].join(":"))) as typeof import("bun:ffi");
    const { i32, u32, u64, ptr } = ffi.FFIType;
    const libc = ffi.dlopen("libc.so.6", {
      splice: { args: [i32, ptr, i32, ptr, u64, u32], returns: i32 },
      pipe2: { args: [ptr, i32], returns: i32 },
      fcntl: { args: [i32, i32, i32], returns: i32 },
      epoll_create1: { args: [i32], returns: i32 },
      epoll_ctl: { args: [i32, i32, i32, ptr], returns: i32 },
      epoll_wait: { args: [i32, ptr, i32, i32], returns: i32 },
      read: { args: [i32, ptr, u64], returns: i32 },
      shutdown: { args: [i32, i32], returns: i32 },
      close: { args: [i32], returns: i32 },
      __errno_location: { args: [], returns: ptr },
    }).symbols;
    const errnoAt = libc.__errno_location()!;
    const errno = () => ffi.read.i32(errnoAt, 0);

    const tunnels = new Map<number, Tunnel>();
    const byFd = new Map<number, Tunnel>();
    let ctl: Int32Array | undefined;
    let wake = -1;
    let seen = 0;
    let arrived: (() => void) | undefined;
    const ep = libc.epoll_create1(O_CLOEXEC);
    const events = new Uint8Array(STRIDE * MAX_EVENTS);
    const view = new DataView(events.buffer);
    const ev = new Uint8Array(16);
    const evView = new DataView(ev.buffer);
    const fds = new Int32Array(2);
    const scratch = new Uint8Array(8);

    const watch = (fd: number): boolean => {
      evView.setUint32(0, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, true);
      evView.setUint32(DATA, fd, true);
      return libc.epoll_ctl(ep, EPOLL_CTL_ADD, fd, ev) === 0;
    };

    const dir = (from: number, to: number): Dir | string => {
      if (libc.pipe2(fds, O_NONBLOCK | O_CLOEXEC) !== 0) return `pipe2: errno ${errno()}`;
      const [pr, pw] = [fds[0]!, fds[1]!];
      libc.fcntl(pw, F_SETPIPE_SZ, PIPE_BYTES);
      return { from, to, pr, pw, cap: libc.fcntl(pw, F_GETPIPE_SZ, 0), inPipe: 0, eof: false, shut: false, total: 0 };
    };

    const finish = (t: Tunnel, error?: string): void => {
      if (!tunnels.delete(t.id)) return;
      byFd.delete(t.a);
      byFd.delete(t.b);
      for (const fd of [t.a, t.b, t.up.pr, t.up.pw, t.down.pr, t.down.pw]) libc.close(fd);
      postMessage({ type: "done", id: t.id, up: t.up.total, down: t.down.total, ...(error ? { error } : {}) });
    };

    /** Moves what it can in one direction; an error name when the tunnel is broken. */
    const pump = (d: Dir): string | undefined => {
      for (;;) {
        let moved = false;
        if (!d.eof && d.inPipe < d.cap) {
          const n = libc.splice(d.from, null, d.pw, null, d.cap - d.inPipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (n > 0) {
            d.inPipe += n;
            moved = true;
          } else if (n === 0) {
            d.eof = true;
            moved = true;
          } else {
            const e = errno();
            if (e !== EAGAIN && e !== EINTR) return ERRNO_NAMES[e] ?? `errno ${e}`;
          }
        }
        if (d.inPipe > 0) {
          const n = libc.splice(d.pr, null, d.to, null, d.inPipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (n > 0) {
            d.inPipe -= n;
            d.total += n;
            moved = true;
          } else {
            const e = errno();
            if (e !== EAGAIN && e !== EINTR) return ERRNO_NAMES[e] ?? `errno ${e}`;
          }
        }
        if (d.eof && d.inPipe === 0 && !d.shut) {
          // Half-close: the other side learns this one has finished sending, and may still answer.
          libc.shutdown(d.to, SHUT_WR);
          d.shut = true;
        }
        if (!moved) return undefined;
      }
    };

    const serve = (t: Tunnel): void => {
      const error = pump(t.up) ?? pump(t.down);
      if (error) finish(t, error);
      else if (t.up.shut && t.down.shut) finish(t);
    };

    const join = (id: number, a: number, b: number): void => {
      const up = dir(a, b);
      const down = typeof up === "string" ? up : dir(b, a);
      if (typeof up === "string" || typeof down === "string") {
        for (const d of [up, down]) if (typeof d !== "string") for (const fd of [d.pr, d.pw]) libc.close(fd);
        libc.close(a);
        libc.close(b);
        postMessage({ type: "done", id, up: 0, down: 0, error: typeof up === "string" ? up : (down as string) });
        return;
      }
      const t: Tunnel = { id, a, b, up, down };
      tunnels.set(id, t);
      byFd.set(a, t);
      byFd.set(b, t);
      if (!watch(a) || !watch(b)) return finish(t, `epoll_ctl: errno ${errno()}`);
      // Edge-triggered: bytes that arrived before the sockets were watched raise no event.
      serve(t);
    };

    handle = (m: ToWorker) => {
      if (m.type === "init") {
        ctl = m.ctl;
        wake = m.wake;
        if (ep < 0 || !watch(wake)) postMessage({ type: "failed", error: `epoll: errno ${errno()}` });
        else void loop();
        return;
      }
      seen++;
      if (m.type === "join") join(m.id, m.a, m.b);
      else
        for (const id of m.ids) {
          const t = tunnels.get(id);
          if (t) finish(t, "closed by the broker");
        }
      arrived?.();
    };

    const loop = async (): Promise<void> => {
      for (;;) {
        const n = libc.epoll_wait(ep, events, MAX_EVENTS, -1);
        let woken = false;
        for (let i = 0; i < n; i++) {
          const fd = view.getUint32(i * STRIDE + DATA, true);
          if (fd === wake) {
            woken = true;
            continue;
          }
          const t = byFd.get(fd);
          if (t) serve(t);
        }
        if (!woken) continue;
        libc.read(wake, scratch, 8);
        // Messages are posted before the eventfd is written: yield until each has been handled.
        while (seen < Atomics.load(ctl!, 0)) await new Promise<void>((r) => (arrived = r));
        arrived = undefined;
      }
    };
    for (const m of inbox.splice(0)) handle(m);
  })().catch((err: Error) => postMessage({ type: "failed", error: err.message }));
}
