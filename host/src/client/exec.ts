// `hutch exec` and `hutch pty attach`: pipe the local stdio to a tool stream
// and come back with the remote exit status (a signal N as 128+N).
import { nodeFs, statOf } from "../libc.ts";
import { constants } from "node:os";
import { Chan, HEADER_BYTES, HutchError, MAX_PAYLOAD, type MuxStream } from "@hutch/shared/base";
import type { Session, ToolOpen } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { growPipe, isDevNull } from "./pipe.ts";
import { openToolStream, streamError } from "./stream.ts";
import { isTerminal } from "./tty.ts";

export interface ExecOptions {
  json?: boolean;
  /** Extra query for the stream (a session attach: session, steal). */
  query?: Record<string, string>;
  /** The command that reattaches, shown on detach. */
  reattach?: string;
  /** The command that shows what was recorded meanwhile, shown on detach (sessions). */
  recorded?: string;
}

const FORWARDED_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"] as const;
const DETACH_PREFIX = 0x01; // Ctrl-A

function signalExit(signal: string): number {
  const n = (constants.signals as Record<string, number>)[`SIG${signal}`];
  return 128 + (n ?? 0);
}

/**
 * Writes to a local fd in order, resolving when the bytes are out, so credit
 * goes back to the box only as fast as our stdout drains. (Bun.write on
 * Bun.stdout writes at offset 0 of a redirected file: a FileSink appends.)
 */
function writer(fd: 1 | 2, onBroken: () => void): (bytes: Uint8Array) => Promise<boolean> {
  void growPipe(fd);
  const sink = (fd === 1 ? Bun.stdout : Bun.stderr).writer({ highWaterMark: 1024 * 1024 });
  let tail: Promise<boolean> = Promise.resolve(true);
  return (bytes) => {
    const next = tail.then(async (open) => {
      if (!open) return false;
      try {
        // A broken pipe shows either as a throw or as write() returning a rejected promise.
        if (bytes.length > 0) {
          const written = sink.write(bytes);
          if (written instanceof Promise) await written;
        }
        await sink.flush();
        return true;
      } catch {
        // Whoever read our output went away (EPIPE): like a process killed by
        // SIGPIPE, stop, and stop the remote side too instead of blocking it.
        onBroken();
        return false;
      }
    });
    tail = next;
    return next;
  };
}

/** The exit status of a process killed by SIGPIPE, which is what a broken output pipe means here. */
const BROKEN_PIPE_EXIT = 141;

function jsonLine(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
function dataRecord(chan: number, bytes: Uint8Array): Record<string, unknown> {
  const type = chan === Chan.stderr ? "stderr" : "stdout";
  try {
    return { type, text: utf8.decode(bytes) };
  } catch {
    return { type, base64: Buffer.from(bytes).toString("base64") };
  }
}

function readFd(fd: number, buf: Uint8Array, offset: number, length: number): Promise<number> {
  return new Promise((resolve, reject) => nodeFs().read(fd, buf, offset, length, null, (err, n) => (err ? reject(err) : resolve(n))));
}

/**
 * Sends stdin that is not a terminal (a pipe or a file). Each read lands in
 * one reused buffer behind HEADER_BYTES of room, so forward() frames it in
 * place: no buffer per chunk and no copy here (the WebSocket copies the frame
 * out in send(), before forward resolves and the buffer is read into again).
 * An fd that turns out to be non-blocking falls back to Bun's stream reader.
 * Stdin on /dev/null is ended without a read: the read would load node:fs
 * (~4 ms of a ~45 ms `exec`, scripts/bench/README.md) to learn it is empty.
 */
async function pumpStdinBulk(stream: MuxStream): Promise<void> {
  const st = statOf(0);
  if (isDevNull(0, st)) {
    stream.eof(Chan.stdin);
    return;
  }
  await growPipe(0, st);
  const buf = new Uint8Array(HEADER_BYTES + MAX_PAYLOAD);
  for (;;) {
    let n: number;
    try {
      n = await readFd(0, buf, HEADER_BYTES, MAX_PAYLOAD);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EAGAIN") return pumpStdin(async () => (stream.closed ? null : stream));
      break;
    }
    if (n === 0 || stream.closed) break;
    if (!(await stream.forward(Chan.stdin, buf.subarray(HEADER_BYTES, HEADER_BYTES + n)))) return;
  }
  stream.eof(Chan.stdin);
}

/** Sends a terminal's keys (or piped input) to the stream `target` names now, which a reattach may replace; null ends it. */
async function pumpStdin(target: () => Promise<MuxStream | null>, transform?: (chunk: Uint8Array) => Uint8Array | null): Promise<void> {
  const reader = Bun.stdin.stream().getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      const stream = await target();
      if (done || !stream) break;
      const chunk = transform ? transform(value) : value;
      if (chunk === null) return;
      if (chunk.length > 0 && !(await stream.write(Chan.stdin, chunk))) return;
    }
    (await target())?.eof(Chan.stdin);
  } finally {
    reader.releaseLock();
  }
}

/** How long a terminal whose connection dropped keeps trying to reattach to it. */
const REATTACH_FOR_MS = 30_000;

/**
 * Runs a tool stream to completion with local stdio attached. Resolves with
 * the exit code the CLI should use.
 */
async function run(daemon: DaemonClient, box: string, call: ToolOpen, tty: boolean, opts: ExecOptions): Promise<number> {
  const { stream, close } = await openToolStream(daemon, box, call, opts.query);
  const a = new Attached(daemon, box, tty, opts, stream, close);
  const stdinTty = isTerminal(0);
  const cleanups = tty && stdinTty ? followTerminal(a) : forwardSignals(a);
  const input = stdinTty ? pumpStdin(() => a.current(), tty ? (chunk) => a.detachKeys(chunk) : undefined) : pumpStdinBulk(a.stream);
  void input.catch(() => undefined);
  try {
    const code = await a.done;
    if (a.detached && a.ptyId) process.stderr.write(detachNote(box, a.ptyId, opts));
    return code;
  } finally {
    for (const c of cleanups) c();
    a.close();
  }
}

/**
 * One tool stream with the local stdio attached: what arrives goes to stdout
 * and stderr (or out as JSON lines) as fast as they drain, the exit status is
 * kept, Ctrl-A d detaches, and a terminal whose connection dropped over a
 * network is attached again (a terminal outlives its connection: `stream`
 * and `close` are then replaced).
 */
class Attached {
  exitCode: number | null = null;
  ptyId: string | undefined;
  detached = false;
  /** Resolves with the exit code the CLI should use. */
  readonly done: Promise<number>;
  private brokenPipe = false;
  private reattaching: Promise<boolean> | null = null;
  private prefixed = false;
  private readonly out: (bytes: Uint8Array) => Promise<boolean>;
  private readonly err: (bytes: Uint8Array) => Promise<boolean>;

  constructor(
    private readonly daemon: DaemonClient,
    private readonly box: string,
    private readonly tty: boolean,
    private readonly opts: ExecOptions,
    public stream: MuxStream,
    public close: () => void,
  ) {
    stream.autoCredit = false;
    const broken = () => {
      if (this.brokenPipe) return;
      this.brokenPipe = true;
      this.close();
    };
    this.out = writer(1, broken);
    this.err = writer(2, broken);
    this.done = new Promise<number>((resolve, reject) => {
      stream.handlers = this.handlers(resolve, reject);
    });
  }

  private handlers(resolve: (code: number) => void, reject: (err: unknown) => void): MuxStream["handlers"] {
    const { opts } = this;
    const handlers: MuxStream["handlers"] = {
      data: (chan, bytes) => {
        if (opts.json) {
          jsonLine(dataRecord(chan, bytes));
          this.stream.consumed(bytes.length);
          return;
        }
        void (chan === Chan.stderr ? this.err : this.out)(bytes).then((ok) => ok && this.stream.consumed(bytes.length));
      },
      msg: (m) => {
        const msg = m as { type: string; code?: number | null; signal?: string | null; pid?: number; pty?: string };
        if (msg.type === "started") this.ptyId = msg.pty;
        if (msg.type === "exit") this.exitCode = msg.code ?? signalExit(msg.signal ?? "");
        if (opts.json) jsonLine(msg);
      },
      close: (error) => {
        // Let queued output reach the terminal before reporting.
        void Promise.all([this.out(new Uint8Array(0)), this.err(new Uint8Array(0))]).then(() =>
          this.closed(error, handlers, resolve, reject),
        );
      },
    };
    return handlers;
  }

  /** The stream ended: the exit code, a reattach, or the error to report. */
  private closed(
    error: Parameters<NonNullable<MuxStream["handlers"]["close"]>>[0],
    handlers: MuxStream["handlers"],
    resolve: (code: number) => void,
    reject: (err: unknown) => void,
  ): void {
    const { box, ptyId } = this;
    if (this.brokenPipe) return resolve(BROKEN_PIPE_EXIT);
    if (this.exitCode !== null) return resolve(this.exitCode);
    if (this.detached) return resolve(0);
    // Over a network (a remote) connections drop and come back; a local daemon that went away is said at once.
    if (error?.code === "channel_lost" && this.tty && ptyId && this.daemon.transport.target.kind === "remote") {
      this.reattaching = this.reattach(ptyId, handlers).finally(() => {
        this.reattaching = null;
      });
      void this.reattaching.then((ok) => {
        if (!ok)
          reject(
            new HutchError("unavailable", "lost the connection; the terminal keeps running", `reattach: hutch pty attach ${box} ${ptyId}`),
          );
      });
      return;
    }
    if (error?.code === "channel_lost" && this.tty && ptyId) {
      return reject(
        new HutchError("unavailable", `lost the connection; the terminal keeps running`, `reattach: hutch pty attach ${box} ${ptyId}`),
      );
    }
    if (error) return reject(streamError(error));
    resolve(0);
  }

  /** Attaches the terminal again, retrying while the daemon cannot be reached; false when it is gone for good. */
  private async reattach(id: string, handlers: MuxStream["handlers"]): Promise<boolean> {
    const deadline = Date.now() + REATTACH_FOR_MS;
    while (Date.now() < deadline && !this.detached) {
      try {
        const again = await openToolStream(this.daemon, this.box, { tool: "pty.attach", id, ...termSize() }, this.opts.query);
        again.stream.autoCredit = false;
        again.stream.handlers = handlers;
        this.stream = again.stream;
        this.close = again.close;
        return true;
      } catch (err) {
        if (err instanceof HutchError && err.code !== "unavailable") return false;
        await Bun.sleep(250);
      }
    }
    return false;
  }

  /** The stream input goes to now: after a reattach, the new one; null once it is gone. */
  async current(): Promise<MuxStream | null> {
    if (this.reattaching && !(await this.reattaching)) return null;
    return this.stream.closed ? null : this.stream;
  }

  /** Ctrl-A d detaches from a terminal without stopping it; Ctrl-A Ctrl-A sends one Ctrl-A. */
  detachKeys(chunk: Uint8Array): Uint8Array | null {
    const kept: number[] = [];
    for (const b of chunk) {
      if (this.prefixed) {
        this.prefixed = false;
        if (b === 0x64 || b === 0x44) {
          this.detached = true;
          this.close();
          return null;
        }
        kept.push(DETACH_PREFIX);
        if (b !== DETACH_PREFIX) kept.push(b);
      } else if (b === DETACH_PREFIX) this.prefixed = true;
      else kept.push(b);
    }
    return new Uint8Array(kept);
  }
}

/** A local terminal in raw mode, its size followed; returns what undoes that. */
function followTerminal(a: Attached): Array<() => void> {
  process.stdin.setRawMode(true);
  const onResize = () => a.stream.msg({ type: "resize", cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 });
  process.on("SIGWINCH", onResize);
  return [() => process.stdin.setRawMode(false), () => process.off("SIGWINCH", onResize)];
}

/** Signals this process gets passed on to the box's process; returns what stops that. */
function forwardSignals(a: Attached): Array<() => void> {
  return FORWARDED_SIGNALS.map((sig) => {
    const handler = () => a.stream.msg({ type: "signal", signal: sig.slice(3) });
    process.on(sig, handler);
    return () => process.off(sig, handler);
  });
}

/** What a detach prints: that it keeps running, and how to come back (and, for a session, to read what was recorded). */
function detachNote(box: string, ptyId: string, opts: ExecOptions): string {
  const reattach = opts.reattach ?? `hutch pty attach ${box} ${ptyId}`;
  return opts.recorded
    ? `\r\n[detached; it keeps running and every byte is logged]\r\n  what was recorded: ${opts.recorded}\r\n  reattach: ${reattach}\r\n`
    : `\r\n[detached from ${ptyId}; reattach: ${reattach}]\r\n`;
}

export interface ExecCall {
  argv: string[];
  env?: Record<string, string>;
  cwd?: string;
  tty?: boolean;
  /** Who runs it: the box's user (default) or root (VM boxes). */
  user?: "hutch" | "root";
}

function termSize(): { cols: number; rows: number } {
  return { cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 };
}

export function execInBox(daemon: DaemonClient, box: string, call: ExecCall, opts: ExecOptions = {}): Promise<number> {
  const base = {
    argv: call.argv,
    ...(call.env ? { env: call.env } : {}),
    ...(call.cwd ? { cwd: call.cwd } : {}),
    ...(call.user ? { user: call.user } : {}),
  };
  if (call.tty) return run(daemon, box, { tool: "pty.open", ...base, ...termSize() }, true, opts);
  return run(daemon, box, { tool: "exec", ...base }, false, opts);
}

export function attachPty(daemon: DaemonClient, box: string, id: string, opts: ExecOptions = {}): Promise<number> {
  return run(daemon, box, { tool: "pty.attach", id, ...termSize() }, true, opts);
}

/** Attaches this terminal to a session: the daemon gives us its terminal and the driver slot. */
export async function attachSession(daemon: DaemonClient, id: string, opts: { steal: boolean; json?: boolean }): Promise<number> {
  const s = await daemon.request<Session>("GET", `/v1/sessions/${encodeURIComponent(id)}`);
  if (s.state !== "open") throw new HutchError("conflict", `session ${id} is closed`, `read its log: hutch session log ${id}`);
  // The pty id is a placeholder the daemon replaces with the session's current terminal.
  return run(daemon, s.box, { tool: "pty.attach", id: s.pty ?? "pty_0", ...termSize() }, true, {
    json: opts.json,
    query: { session: id, ...(opts.steal ? { steal: "1" } : {}) },
    reattach: `hutch session attach ${id}`,
    recorded: `hutch session log ${id}`,
  });
}
