// One host connection: a socket and its Mux. The socket's write queue needs
// no cap of its own: data frames are bounded by the per-stream credit
// windows, and the rest (credit, msg, close) are small and answer the host's
// own frames.
import { Value } from "@sinclair/typebox/value";
import {
  CAPABILITIES,
  DEFAULT_WINDOW,
  HUTCH_VERSION,
  HostHello,
  Mux,
  PROTOCOL_VERSION,
  ProtocolError,
  ShutdownMsg,
  ClockMsg,
  IdentityMsg,
  type GuestHello,
} from "@hutch/shared/wire";
import { SocketWriter, type ByteSink } from "./socket-writer.ts";
import { setClock as ffiSetClock, sethostname } from "./init/ffi.ts";
import { handleOpen } from "./tools/index.ts";
import type { ToolContext } from "./tools/context.ts";

/** A clock off by less than this is left alone: the hello's own trip takes some of it. */
const CLOCK_SLACK_MS = 1000;

/** A host that connects but never says hello is dropped after this long. */
const HELLO_TIMEOUT_MS = 10_000;

let nextConnId = 1;

export class Connection {
  readonly id = nextConnId++;
  private readonly mux: Mux;
  private readonly writer: SocketWriter;
  private readonly helloTimer: Timer;

  constructor(
    socket: ByteSink,
    private readonly ctx: ToolContext,
    private readonly shutdown: (graceMs: number, why: string) => void,
    private readonly setClock: (ms: number) => void = ffiSetClock,
    private readonly setHostname: (name: string) => void = sethostname,
  ) {
    this.writer = new SocketWriter(socket);
    this.mux = new Mux(
      {
        write: (bytes) => this.writer.write(bytes),
        writeParts: (header, payload) => this.writer.writeParts(header, payload),
        close: () => this.writer.end(),
        backlog: () => this.writer.queued,
      },
      {
        role: "guest",
        window: DEFAULT_WINDOW,
        onHello: (hello) => this.hello(hello),
        onOpen: (stream, payload) => handleOpen(stream, payload, ctx),
        onControl: (msg) => this.control(msg),
        onError: (err) => ctx.log.warn("connection failed", { conn: this.id, error: err.message }),
      },
    );
    this.helloTimer = setTimeout(() => {
      this.mux.fail(new ProtocolError(`no hello within ${HELLO_TIMEOUT_MS} ms`));
    }, HELLO_TIMEOUT_MS);
    ctx.log.info("connection opened", { conn: this.id });
  }

  feed(chunk: Uint8Array): void {
    this.mux.feed(chunk);
  }

  drain(): void {
    this.writer.drain();
  }

  /** The socket closed: every stream of this connection ends (exec processes are killed by their handlers). */
  lost(reason: string): void {
    clearTimeout(this.helloTimer);
    if (this.mux.alive) this.ctx.log.info("connection closed", { conn: this.id, reason });
    this.writer.discard();
    this.mux.lost(reason);
  }

  // Throwing here is a protocol error: the Mux closes the connection and
  // stops dispatching the frames behind the hello.
  private hello(hello: unknown): void {
    clearTimeout(this.helloTimer);
    if (!Value.Check(HostHello, hello)) {
      const first = Value.Errors(HostHello, hello).First();
      throw new ProtocolError(`bad host hello: ${first ? `${first.path.slice(1) || "hello"}: ${first.message}` : "invalid"}`);
    }
    if (hello.protocol !== PROTOCOL_VERSION) {
      throw new ProtocolError(`host speaks protocol ${hello.protocol}, this guest speaks ${PROTOCOL_VERSION}`);
    }
    const answer: GuestHello = {
      protocol: PROTOCOL_VERSION,
      agent: "hutch-guest",
      version: HUTCH_VERSION,
      capabilities: [...CAPABILITIES],
      window: DEFAULT_WINDOW,
      roots: this.ctx.config.roots,
      ...(hello.nonce !== undefined ? { answers: hello.nonce } : {}),
    };
    if (hello.time !== undefined) this.followClock(hello.time);
    this.mux.sendHello(answer);
    this.ctx.log.info("host hello", { conn: this.id, client: hello.client, version: hello.version });
  }

  /**
   * A VM restored from sleep runs on from the moment it slept: its clock is
   * behind by the time it was asleep, and the host's hello (sent on every
   * wake) carries the right one. Only a VM's PID 1 may set it; a process box
   * shares the host's clock.
   */
  private followClock(hostMs: number): void {
    const behind = hostMs - Date.now();
    if (this.ctx.config.boxUser === null || Math.abs(behind) < CLOCK_SLACK_MS) return;
    try {
      this.setClock(hostMs);
      this.ctx.log.info("clock set from the host", { conn: this.id, behindMs: Math.round(behind) });
    } catch (err) {
      this.ctx.log.warn("could not set the clock", { conn: this.id, error: (err as Error).message });
    }
  }

  /**
   * The box this guest now is: a VM booted for a warm pool and claimed wakes
   * with the pool box's hostname and HUTCH_BOX_ID, and takes the claiming
   * box's before the host opens any stream (control frames are handled in
   * order with the rest). Only a VM's PID 1 sets the hostname; a process box
   * is started afresh with its own.
   */
  private takeIdentity(msg: IdentityMsg): void {
    const env = this.ctx.config.baseEnv;
    if (env.HUTCH_BOX_ID !== undefined && env.HUTCH_BOX_ID !== msg.id) {
      this.ctx.log.info("box identity from the host", { conn: this.id, was: env.HUTCH_BOX_ID, id: msg.id, name: msg.name });
      env.HUTCH_BOX_ID = msg.id;
    }
    if (this.ctx.config.boxUser === null) return;
    try {
      this.setHostname(msg.name);
    } catch (err) {
      this.ctx.log.warn("could not set the hostname", { conn: this.id, error: (err as Error).message });
    }
  }

  private control(msg: unknown): void {
    if (Value.Check(ShutdownMsg, msg)) return this.shutdown(msg.graceMs, "shutdown requested by the host");
    if (Value.Check(ClockMsg, msg)) return this.followClock(msg.time);
    if (Value.Check(IdentityMsg, msg)) return this.takeIdentity(msg);
    this.ctx.log.warn("unknown control message ignored", { conn: this.id });
  }
}
