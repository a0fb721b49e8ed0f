// One multiplexer for both ends of the channel (host and guest), and for the
// daemon↔CLI leg of a relayed stream. It owns framing state, stream ids,
// credit accounting and the hello; it knows nothing about tools.
import {
  DEFAULT_WINDOW,
  FrameDecoder,
  MAX_PAYLOAD,
  ProtocolError,
  decodeJson,
  decodeU32,
  encodeFrame,
  encodeHeader,
  encodeJson,
  encodeU32,
  reframe,
  type Frame,
  type FrameTypeName,
} from "./codec.ts";

export interface Transport {
  write(bytes: Uint8Array): void;
  /**
   * Optional: writes a header and then its payload as one frame, without
   * joining them (two socket writes cost less than a 256 KiB copy). The
   * header is handed over; the payload stays the caller's (MuxStream.write
   * callers may reuse it once write resolves), so a transport must copy any
   * part of it that it cannot write at once.
   */
  writeParts?(header: Uint8Array, payload: Uint8Array): void;
  close(): void;
  /** Optional: bytes written but not yet taken by the socket (the peer cannot have read them). */
  backlog?(): number;
}

/** consumed() grants credit once this fraction of the window (1/n) has been consumed. */
const CREDIT_BATCH_DIVISOR = 4;

/** Payloads at least this big go to Transport.writeParts instead of being copied behind their header. */
const SPLIT_WRITE_MIN = 16 * 1024;

/** Why a stream was closed: the payload of a close frame. */
export interface StreamError {
  code: string;
  message: string;
  /** What to do next, when the closer knows (the daemon's named errors carry one). */
  hint?: string;
}

export interface StreamHandlers {
  data?(chan: number, bytes: Uint8Array): void;
  msg?(msg: unknown): void;
  eof?(chan: number): void;
  /** The peer granted n more bytes of credit: it is reading. */
  credit?(n: number): void;
  /** The stream ended: closed by the peer (with its error, if any), or the channel was lost. */
  close?(error?: StreamError): void;
}

export interface MuxOptions {
  /** "host" opens streams; "guest" accepts them. */
  role: "host" | "guest";
  /** Receive window granted to the peer per stream. */
  window?: number;
  /** Guest side: a new stream was opened with this JSON payload. */
  onOpen?(stream: MuxStream, payload: unknown): void;
  /** The peer's hello arrived. */
  onHello?(hello: unknown): void;
  /** A protocol violation: the transport is already closed when this runs. */
  onError?(err: ProtocolError): void;
  /** A stream-0 message (control plane, e.g. shutdown). */
  onControl?(msg: unknown): void;
}

export class MuxStream {
  handlers: StreamHandlers = {};
  /** When true, received DATA is credited back at once; relays turn it off and call consumed(). */
  autoCredit = true;
  closed = false;
  private sendWindow: number;
  private recvWindow: number;
  /** Consumed bytes not yet granted back; see consumed(). */
  private uncredited = 0;
  private readonly creditBatch: number;
  private waiters: Array<() => void> = [];

  constructor(
    readonly id: number,
    private readonly mux: Mux,
    private readonly initialWindow: number,
  ) {
    this.sendWindow = initialWindow;
    this.recvWindow = initialWindow;
    this.creditBatch = Math.max(1, Math.floor(initialWindow / CREDIT_BATCH_DIVISOR));
  }

  /** Sends bytes on a channel, waiting for credit as needed. Resolves false if the stream closed first. */
  async write(chan: number, bytes: Uint8Array): Promise<boolean> {
    let off = 0;
    while (off < bytes.length) {
      if (this.closed) return false;
      if (this.sendWindow === 0) {
        await new Promise<void>((resolve) => this.waiters.push(resolve));
        continue;
      }
      const n = Math.min(this.sendWindow, MAX_PAYLOAD, bytes.length - off);
      this.sendWindow -= n;
      this.mux.send("data", this.id, chan, bytes.subarray(off, off + n));
      off += n;
    }
    return !this.closed;
  }

  /**
   * Sends a DATA payload as one frame without copying it: the header is
   * written over the HEADER_BYTES in front of it (see reframe()), which must
   * be the caller's to overwrite, as they are behind a payload that came out
   * of a FrameDecoder, or behind one read into a buffer with that room left.
   * The frame goes to the transport as is, so the caller must not touch the
   * payload again unless the transport copies it. Waits for credit for all
   * of it; resolves false if the stream closed first.
   */
  async forward(chan: number, payload: Uint8Array): Promise<boolean> {
    if (payload.length > this.initialWindow) return this.write(chan, payload);
    while (this.sendWindow < payload.length) {
      if (this.closed) return false;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    if (this.closed) return false;
    this.sendWindow -= payload.length;
    this.mux.sendFrame("data", this.id, chan, payload);
    return true;
  }

  /** Bytes that may be sent now without waiting. */
  get window(): number {
    return this.sendWindow;
  }

  /** Bytes still queued on this side of the connection (any stream's): the peer cannot have read them yet. */
  get backlog(): number {
    return this.mux.backlog;
  }

  eof(chan: number): void {
    if (!this.closed) this.mux.send("eof", this.id, chan, new Uint8Array(0));
  }

  msg(value: unknown): void {
    if (!this.closed) this.mux.send("msg", this.id, 0, encodeJson(value));
  }

  /**
   * Gives the peer credit for n more bytes, after they were consumed. Grants
   * go out in batches of a quarter window: one CREDIT per DATA frame was half
   * of all the frames on a bulk stream, at every hop. The sender still holds
   * at least three quarters of a window, so it never waits on a batch.
   * A sender left with less than a quarter window (this reader is the slow
   * side) gets each grant at once: it is waiting on it, and a sender that
   * hears nothing for long takes its reader for stuck (a PTY attachment
   * drops a host that grants nothing while it is behind).
   */
  consumed(n: number): void {
    if (this.closed || n <= 0) return;
    this.uncredited += n;
    if (this.uncredited < this.creditBatch && this.recvWindow >= this.creditBatch) return;
    const grant = this.uncredited;
    this.uncredited = 0;
    this.recvWindow += grant;
    this.mux.send("credit", this.id, 0, encodeU32(grant));
  }

  close(error?: StreamError): void {
    if (this.closed) return;
    this.mux.send("close", this.id, 0, error ? encodeJson(error) : new Uint8Array(0));
    this.finish();
  }

  /** @internal */
  receive(frame: Frame): void {
    switch (frame.type) {
      case "data": {
        this.recvWindow -= frame.payload.length;
        if (this.recvWindow < 0) {
          throw new ProtocolError(`stream ${this.id}: peer sent past its credit`);
        }
        this.handlers.data?.(frame.chan, frame.payload);
        if (this.autoCredit) this.consumed(frame.payload.length);
        return;
      }
      case "credit": {
        const n = decodeU32(frame.payload);
        this.sendWindow += n;
        if (this.sendWindow > 0x7fffffff) throw new ProtocolError(`stream ${this.id}: credit overflow`);
        const waiters = this.waiters;
        this.waiters = [];
        for (const wake of waiters) wake();
        this.handlers.credit?.(n);
        return;
      }
      case "eof":
        this.handlers.eof?.(frame.chan);
        return;
      case "msg":
        this.handlers.msg?.(decodeJson(frame.payload));
        return;
      case "close": {
        const error = frame.payload.length > 0 ? parseStreamError(decodeJson(frame.payload)) : undefined;
        this.finish(error);
        return;
      }
      default:
        throw new ProtocolError(`stream ${this.id}: unexpected ${frame.type} frame`);
    }
  }

  /** @internal */
  finish(error?: StreamError): void {
    if (this.closed) return;
    this.closed = true;
    this.mux.forget(this.id);
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
    this.handlers.close?.(error);
  }
}

function parseStreamError(value: unknown): StreamError {
  if (value && typeof value === "object") {
    const { code, message, hint } = value as Record<string, unknown>;
    if (typeof code === "string" && typeof message === "string" && (hint === undefined || typeof hint === "string")) {
      return { code, message, ...(hint !== undefined ? { hint } : {}) };
    }
  }
  throw new ProtocolError("close payload is not {code, message, hint?}");
}

export class Mux {
  private readonly decoder = new FrameDecoder();
  private readonly streams = new Map<number, MuxStream>();
  private readonly window: number;
  private sendSeq = 0;
  private lastStreamId = 0;
  private peerHello: unknown = undefined;
  private dead = false;
  /** roundTrip() callers, in the order their pings went out. */
  private pongs: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];

  constructor(
    private readonly transport: Transport,
    private readonly opts: MuxOptions,
  ) {
    this.window = opts.window ?? DEFAULT_WINDOW;
  }

  get alive(): boolean {
    return !this.dead;
  }

  get hello(): unknown {
    return this.peerHello;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  /** Bytes this side wrote that are still queued before the socket: 0 when the transport does not say. */
  get backlog(): number {
    return this.transport.backlog?.() ?? 0;
  }

  sendHello(hello: unknown): void {
    this.send("hello", 0, 0, encodeJson(hello));
  }

  control(msg: unknown): void {
    this.send("msg", 0, 0, encodeJson(msg));
  }

  ping(): void {
    this.send("ping", 0, 0, new Uint8Array(0));
  }

  /**
   * Sends a ping and resolves at its pong: the peer has read every frame
   * sent before it. Rejects if the channel is lost first.
   */
  roundTrip(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.dead) return reject(new Error("the channel is closed"));
      this.pongs.push({ resolve, reject });
      this.ping();
    });
  }

  /** Host side: opens a stream for a tool call. */
  open(payload: unknown): MuxStream {
    if (this.opts.role !== "host") throw new Error("only the host opens streams");
    const id = ++this.lastStreamId;
    const stream = new MuxStream(id, this, this.window);
    this.streams.set(id, stream);
    this.send("open", id, 0, encodeJson(payload));
    return stream;
  }

  /** Feeds bytes from the transport. Never throws: a violation closes the channel. */
  feed(chunk: Uint8Array): void {
    if (this.dead) return;
    try {
      for (const frame of this.decoder.push(chunk)) {
        // A handler may have failed the channel: nothing after that runs.
        if (this.dead) break;
        this.dispatch(frame);
      }
    } catch (err) {
      this.fail(err instanceof ProtocolError ? err : new ProtocolError(String((err as Error)?.message ?? err)));
    }
  }

  /** The transport ended (EOF or error): every open stream learns the channel is gone. */
  lost(reason = "channel closed"): void {
    if (this.dead) return;
    this.dead = true;
    for (const stream of [...this.streams.values()]) stream.finish({ code: "channel_lost", message: reason });
    for (const p of this.pongs.splice(0)) p.reject(new Error(reason));
  }

  fail(err: ProtocolError): void {
    if (this.dead) return;
    this.transport.close();
    this.lost(`protocol error: ${err.message}`);
    this.opts.onError?.(err);
  }

  /** @internal */
  send(type: FrameTypeName, stream: number, chan: number, payload: Uint8Array): void {
    if (this.dead) return;
    const seq = this.sendSeq;
    if (payload.length >= SPLIT_WRITE_MIN && this.transport.writeParts) {
      const header = encodeHeader(type, stream, chan, seq, payload.length);
      this.sendSeq = (seq + 1) >>> 0;
      this.transport.writeParts(header, payload);
      return;
    }
    const frame = encodeFrame(type, stream, chan, seq, payload);
    this.sendSeq = (seq + 1) >>> 0;
    this.transport.write(frame);
  }

  /** @internal Sends a decoded payload under a new header written in place (MuxStream.forward). */
  sendFrame(type: FrameTypeName, stream: number, chan: number, payload: Uint8Array): void {
    if (this.dead) return;
    const frame = reframe(type, stream, chan, this.sendSeq, payload);
    if (!frame) return this.send(type, stream, chan, payload);
    this.sendSeq = (this.sendSeq + 1) >>> 0;
    this.transport.write(frame);
  }

  /** @internal */
  forget(id: number): void {
    this.streams.delete(id);
  }

  private dispatch(frame: Frame): void {
    if (this.peerHello === undefined) {
      if (frame.type !== "hello") throw new ProtocolError(`expected hello, got ${frame.type}`);
      this.peerHello = decodeJson(frame.payload);
      this.opts.onHello?.(this.peerHello);
      return;
    }
    if (frame.stream === 0) return this.dispatchControl(frame);
    if (frame.type === "open") return this.accept(frame);
    const stream = this.streams.get(frame.stream);
    if (stream) return stream.receive(frame);
    // Frames racing a close we already sent are fine; frames for a stream
    // that never existed are not.
    if (frame.stream > this.lastStreamId) {
      throw new ProtocolError(`${frame.type} frame for stream ${frame.stream}, which was never opened`);
    }
  }

  private dispatchControl(frame: Frame): void {
    switch (frame.type) {
      case "ping":
        this.send("pong", 0, 0, new Uint8Array(0));
        return;
      case "pong":
        this.pongs.shift()?.resolve();
        return;
      case "msg":
        this.opts.onControl?.(decodeJson(frame.payload));
        return;
      default:
        throw new ProtocolError(`unexpected ${frame.type} frame on stream 0`);
    }
  }

  private accept(frame: Frame): void {
    if (this.opts.role !== "guest") throw new ProtocolError("the guest may not open streams");
    if (frame.stream <= this.lastStreamId) {
      throw new ProtocolError(`stream id ${frame.stream} reused or out of order`);
    }
    this.lastStreamId = frame.stream;
    const stream = new MuxStream(frame.stream, this, this.window);
    this.streams.set(frame.stream, stream);
    const payload = decodeJson(frame.payload);
    if (!this.opts.onOpen) {
      stream.close({ code: "unsupported", message: "this end accepts no streams" });
      return;
    }
    this.opts.onOpen(stream, payload);
  }
}
