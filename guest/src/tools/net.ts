// net.listen / net.accept: the guest listens on its own loopback and hands
// each connection to the host as a stream of its own. This is how a box
// reaches its broker with no network of its own: processes in the box dial
// 127.0.0.1:<port>, the host relays the stream to that box's broker listener.
import type { TCPSocketListener } from "bun";
import { listenLoopback, type NativeSocket } from "./native-socket.ts";
import { Chan, joinSocket, type MuxStream } from "@hutch/shared/wire";
import { takeFrames } from "./inbox.ts";
import type { Req } from "./base.ts";
import type { GuestConfig } from "../config.ts";
import type { Logger } from "../log.ts";

/** A connection the host has not taken within this long is dropped. */
const ACCEPT_TIMEOUT_MS = 10_000;
/** Connections waiting for the host, per listener; more are refused at once. */
const MAX_WAITING = 256;

interface Listener {
  server?: TCPSocketListener<NativeSocket>;
  stream: MuxStream;
  env: Record<string, string>;
}

export class NetTable {
  private readonly listeners = new Map<number, Listener>();
  private readonly waiting = new Map<number, { socket: NativeSocket; timer: Timer }>();
  private nextConn = 1;

  constructor(
    private readonly config: GuestConfig,
    private readonly log: Logger,
  ) {}

  /** The ports the guest listens on for the host. */
  ports(): number[] {
    return [...this.listeners.keys()];
  }

  listen(stream: MuxStream, req: Req<"net.listen">): void {
    const before = this.listeners.get(req.port);
    // A new host connection takes over the port from the last one's listener.
    if (before) this.unlisten(req.port, before);
    const listener: Listener = { stream, env: req.env ?? {} };
    this.listeners.set(req.port, listener);
    takeFrames(stream, { close: () => this.unlisten(req.port, listener) }, true);
    try {
      listener.server = listenLoopback(req.port, (socket) => this.arrived(req.port, socket));
    } catch (err) {
      this.log.info("listen failed", { port: req.port, error: (err as Error).message });
      stream.close({ code: "failed", message: `127.0.0.1:${req.port}: ${(err as Error).message}` });
      this.unlisten(req.port, listener);
      return;
    }
    Object.assign(this.config.serviceEnv, listener.env);
    stream.msg({ type: "result", value: { port: req.port } });
    this.log.debug("listening", { port: req.port });
  }

  accept(stream: MuxStream, req: Req<"net.accept">): void {
    const entry = this.waiting.get(req.conn);
    if (!entry) return stream.close({ code: "not_found", message: `connection ${req.conn} is gone (closed, or not taken in time)` });
    this.waiting.delete(req.conn);
    clearTimeout(entry.timer);
    joinSocket(stream, entry.socket, Chan.stdin, Chan.stdout, (h) => takeFrames(stream, h, false));
  }

  private arrived(port: number, socket: NativeSocket): void {
    const listener = this.listeners.get(port);
    if (!listener || this.waiting.size >= MAX_WAITING) {
      socket.destroy();
      return;
    }
    const conn = this.nextConn++;
    const timer = setTimeout(() => {
      this.waiting.delete(conn);
      socket.destroy();
    }, ACCEPT_TIMEOUT_MS);
    this.waiting.set(conn, { socket, timer });
    listener.stream.msg({ type: "conn", conn });
  }

  private unlisten(port: number, listener: Listener): void {
    if (this.listeners.get(port) !== listener) return;
    this.listeners.delete(port);
    listener.server?.stop(true);
    for (const key of Object.keys(listener.env)) {
      if (this.config.serviceEnv[key] === listener.env[key]) delete this.config.serviceEnv[key];
    }
    if (!listener.stream.closed) listener.stream.close();
  }
}
