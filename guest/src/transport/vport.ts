// The QEMU engine's channel: the virtio-serial port named hutch.agent
// (/dev/vportNpM), one host connection at a time (QEMU's chardev socket takes
// one client). What virtio_console does, and what follows from it:
// - While no host is connected, read returns 0 and poll reports POLLHUP: a
//   read of 0 parks the connection (its output held), and POLLHUP going away
//   lets it write again. The end of file can be an earlier host's, read
//   after the next host's first bytes, so the next frame decides whether a
//   new connection starts (a hello) or the parked one goes on
//   (port-sessions.ts).
// - A blocking write made while the host is away waits for the *next* host
//   and would hand it the old connection's bytes, so the port is opened
//   O_NONBLOCK: such writes fail with EAGAIN and are dropped when the next
//   host's hello ends the connection. EAGAIN also means a full virtqueue (backpressure): the bytes
//   wait in the connection's SocketWriter, bounded by the streams' credit.
// - The guest cannot hang up on the host. After a protocol error it ignores
//   input until the host disconnects or a new hello arrives (frames.ts).
// - A host that reconnects before the guest read the end of file is found by
//   its hello (frames.ts); the old connection's last output may reach it
//   before the guest's hello does.
import { constants, openSync, readdirSync, readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { Connection } from "../connection.ts";
import { EAGAIN, EINTR, pollNow, POLLHUP, POLLIN, writeFd } from "../init/ffi.ts";
import type { Channel, ChannelDeps } from "./channel.ts";
import { PortSessions, type PortSession } from "./port-sessions.ts";

/** How often to look for a host while none is connected. */
const HOST_POLL_MS = 100;
/** How soon to retry a write the port refused (full virtqueue). */
const WRITE_RETRY_MS = 2;
/** Linux; missing from node:fs constants. */
const O_CLOEXEC = 0o2000000;

export interface PortDirs {
  /** Where the kernel lists virtio-serial ports, each with a `name` file. */
  classDir: string;
  devDir: string;
}

const SYSTEM: PortDirs = { classDir: "/sys/class/virtio-ports", devDir: "/dev" };

/** The device of the port with this name (`/dev/vport0p1`), if the kernel has named one so. */
export function findPort(name: string, dirs: PortDirs = SYSTEM): string | undefined {
  let entries: string[];
  try {
    entries = readdirSync(dirs.classDir).sort();
  } catch {
    return undefined;
  }
  for (const dir of entries) {
    try {
      if (readFileSync(join(dirs.classDir, dir, "name"), "utf8").trim() === name) return join(dirs.devDir, dir);
    } catch {
      // A port being added has no name yet.
    }
  }
  return undefined;
}

/** Ports appear (and get their names) asynchronously after the driver loads. */
export async function waitForPort(name: string, timeoutMs: number, dirs: PortDirs = SYSTEM): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const dev = findPort(name, dirs);
    if (dev && existsSync(dev)) return dev;
    if (Date.now() > until) {
      throw new Error(
        `no virtio-serial port named ${name} under ${dirs.classDir} after ${timeoutMs} ms (is the virtserialport device given to QEMU?)`,
      );
    }
    await Bun.sleep(20);
  }
}

/** What SocketWriter needs of a socket, over the port's fd. */
class PortWriter {
  open = true;
  /** Parked: the host may be gone, so nothing is written until it is back. */
  held = false;
  private retry: Timer | undefined;

  constructor(
    private readonly fd: number,
    private readonly onWritable: () => void,
    private readonly onEnd: () => void,
  ) {}

  /** Bytes the port took now; SocketWriter keeps the rest until onWritable. */
  write(bytes: Uint8Array): number {
    if (!this.open) return bytes.length;
    if (this.held) return 0;
    let off = 0;
    while (off < bytes.length) {
      const n = writeFd(this.fd, off === 0 ? bytes : bytes.subarray(off));
      if (n > 0) off += n;
      else if (n === -EINTR) continue;
      else if (n === 0 || n === -EAGAIN) {
        this.retryLater();
        break;
      } else {
        // EIO/ENODEV/EPIPE: the host or the port is gone, and the read side
        // ends this connection too.
        this.close();
        return bytes.length;
      }
    }
    return off;
  }

  /** The guest ends the connection (protocol error, hello timeout). */
  end(): void {
    if (!this.open) return;
    this.close();
    this.onEnd();
  }

  close(): void {
    this.open = false;
    clearTimeout(this.retry);
    this.retry = undefined;
  }

  hold(): void {
    this.held = true;
    clearTimeout(this.retry);
    this.retry = undefined;
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    if (this.open) this.onWritable();
  }

  private retryLater(): void {
    this.retry ??= setTimeout(() => {
      this.retry = undefined;
      if (this.open) this.onWritable();
    }, WRITE_RETRY_MS);
  }
}

export async function openVport(name: string, deps: ChannelDeps, opts: { portTimeoutMs?: number; dirs?: PortDirs } = {}): Promise<Channel> {
  const dev = await waitForPort(name, opts.portTimeoutMs ?? 10_000, opts.dirs);
  const fd = openSync(dev, constants.O_RDWR | constants.O_NONBLOCK | O_CLOEXEC);
  const channel = new VportChannel(`vport:${name} (${dev})`, fd, deps);
  void channel.serve();
  return channel;
}

class VportChannel implements Channel {
  private stopped = false;
  private readonly sessions: PortSessions;

  constructor(
    readonly where: string,
    private readonly fd: number,
    private readonly deps: ChannelDeps,
  ) {
    this.sessions = new PortSessions(() => this.session(), deps.ctx.log);
  }

  stop(): void {
    this.stopped = true;
  }

  async close(): Promise<void> {
    // The fd stays open: closing it tells nobody anything, and the guest is about to power off or exit.
  }

  async serve(): Promise<void> {
    const { log } = this.deps.ctx;
    while (!this.stopped) {
      try {
        if (pollNow(this.fd, POLLIN) & POLLHUP) {
          await Bun.sleep(HOST_POLL_MS);
          continue;
        }
        this.sessions.hostBack();
        await this.read();
      } catch (err) {
        log.error("vport channel failed", { error: (err as Error).message });
        await Bun.sleep(HOST_POLL_MS);
      }
    }
  }

  /**
   * From POLLHUP clearing to read returning 0. Which connection the bytes
   * belong to is PortSessions' to say (port-sessions.ts): an end of file
   * parks the connection, and the next bytes tell whether it goes on.
   */
  private async read(): Promise<void> {
    try {
      // Bun reads a non-blocking character device through its event loop
      // (measured: no busy loop, ~5 ms latency under tcg), and ends the
      // stream at the first read of 0 without closing the fd.
      for await (const chunk of Bun.file(this.fd).stream()) this.sessions.data(chunk);
      this.sessions.endOfFile("host disconnected");
    } catch (err) {
      this.sessions.fail(`read failed: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      await Bun.sleep(HOST_POLL_MS);
    }
  }

  private session(): PortSession {
    const { ctx, shutdown } = this.deps;
    const writer: PortWriter = new PortWriter(
      this.fd,
      () => conn.drain(),
      () => ctx.log.info("ignoring input until the host disconnects or says hello again", { conn: conn.id }),
    );
    // Connection takes a Bun socket but uses only write and end (through SocketWriter).
    const conn = new Connection(writer, ctx, shutdown);
    return {
      get alive() {
        return writer.open;
      },
      feed: (bytes) => conn.feed(bytes),
      park: () => writer.hold(),
      resume: () => writer.release(),
      end(reason) {
        writer.close();
        conn.lost(reason);
      },
    };
  }
}
