// `hutch exec` and `hutch pty attach`: pipe the local stdio to a tool stream
// and come back with the remote exit status (a signal N as 128+N).
import { read } from "node:fs";
import { constants } from "node:os";
import { Chan, HEADER_BYTES, HutchError, MAX_PAYLOAD, type MuxStream } from "@hutch/shared/base";
import type { Session, ToolOpen } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { growPipe } from "./pipe.ts";
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
  return new Promise((resolve, reject) => read(fd, buf, offset, length, null, (err, n) => (err ? reject(err) : resolve(n))));
}

/**
 * Sends stdin that is not a terminal (a pipe or a file). Each read lands in
 * one reused buffer behind HEADER_BYTES of room, so forward() frames it in
 * place: no buffer per chunk and no copy here (the WebSocket copies the frame
 * out in send(), before forward resolves and the buffer is read into again).
 * An fd that turns out to be non-blocking falls back to Bun's stream reader.
 */
async function pumpStdinBulk(stream: MuxStream): Promise<void> {
  await growPipe(0);
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
  // A terminal outlives its connection: when that drops, the same terminal is attached again and these two are replaced.
  let { stream, close } = await openToolStream(daemon, box, call, opts.query);
  stream.autoCredit = false;
  let reattaching: Promise<boolean> | null = null;
  let brokenPipe = false;
  const broken = () => {
    if (brokenPipe) return;
    brokenPipe = true;
    close();
  };
  const out = writer(1, broken);
  const err = writer(2, broken);
  let exitCode: number | null = null;
  let ptyId: string | undefined;
  let detached = false;
  const cleanups: Array<() => void> = [];

  const done = new Promise<number>((resolve, reject) => {
    const handlers: MuxStream["handlers"] = {
      data(chan, bytes) {
        if (opts.json) {
          jsonLine(dataRecord(chan, bytes));
          stream.consumed(bytes.length);
          return;
        }
        void (chan === Chan.stderr ? err : out)(bytes).then((ok) => ok && stream.consumed(bytes.length));
      },
      msg(m) {
        const msg = m as { type: string; code?: number | null; signal?: string | null; pid?: number; pty?: string };
        if (msg.type === "started") ptyId = msg.pty;
        if (msg.type === "exit") exitCode = msg.code ?? signalExit(msg.signal ?? "");
        if (opts.json) jsonLine(msg);
      },
      close(error) {
        // Let queued output reach the terminal before reporting.
        void Promise.all([out(new Uint8Array(0)), err(new Uint8Array(0))]).then(() => {
          if (brokenPipe) return resolve(BROKEN_PIPE_EXIT);
          if (exitCode !== null) return resolve(exitCode);
          if (detached) return resolve(0);
          // Over a network (a remote) connections drop and come back; a local daemon that went away is said at once.
          if (error?.code === "channel_lost" && tty && ptyId && daemon.transport.target.kind === "remote") {
            const id = ptyId;
            reattaching = reattach(id).finally(() => {
              reattaching = null;
            });
            void reattaching.then((ok) => {
              if (!ok)
                reject(
                  new HutchError(
                    "unavailable",
                    "lost the connection; the terminal keeps running",
                    `reattach: hutch pty attach ${box} ${id}`,
                  ),
                );
            });
            return;
          }
          if (error?.code === "channel_lost" && tty && ptyId) {
            return reject(
              new HutchError(
                "unavailable",
                `lost the connection; the terminal keeps running`,
                `reattach: hutch pty attach ${box} ${ptyId}`,
              ),
            );
          }
          if (error) return reject(streamError(error));
          resolve(0);
        });
      },
    };
    stream.handlers = handlers;
    /** Attaches the terminal again, retrying while the daemon cannot be reached; false when it is gone for good. */
    const reattach = async (id: string): Promise<boolean> => {
      const deadline = Date.now() + REATTACH_FOR_MS;
      while (Date.now() < deadline && !detached) {
        try {
          const again = await openToolStream(daemon, box, { tool: "pty.attach", id, ...termSize() }, opts.query);
          again.stream.autoCredit = false;
          again.stream.handlers = handlers;
          stream = again.stream;
          close = again.close;
          return true;
        } catch (err) {
          if (err instanceof HutchError && err.code !== "unavailable") return false;
          await Bun.sleep(250);
        }
      }
      return false;
    };
  });

  const stdinTty = isTerminal(0);
  if (tty && stdinTty) {
    process.stdin.setRawMode(true);
    cleanups.push(() => process.stdin.setRawMode(false));
    const onResize = () => stream.msg({ type: "resize", cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 });
    process.on("SIGWINCH", onResize);
    cleanups.push(() => process.off("SIGWINCH", onResize));
  } else {
    for (const sig of FORWARDED_SIGNALS) {
      const handler = () => stream.msg({ type: "signal", signal: sig.slice(3) });
      process.on(sig, handler);
      cleanups.push(() => process.off(sig, handler));
    }
  }

  // Ctrl-A d detaches from a terminal without stopping it; Ctrl-A Ctrl-A sends one Ctrl-A.
  let prefixed = false;
  const detachKeys = (chunk: Uint8Array): Uint8Array | null => {
    const kept: number[] = [];
    for (const b of chunk) {
      if (prefixed) {
        prefixed = false;
        if (b === 0x64 || b === 0x44) {
          detached = true;
          close();
          return null;
        }
        kept.push(DETACH_PREFIX);
        if (b !== DETACH_PREFIX) kept.push(b);
      } else if (b === DETACH_PREFIX) prefixed = true;
      else kept.push(b);
    }
    return new Uint8Array(kept);
  };
  const current = async (): Promise<MuxStream | null> => {
    if (reattaching && !(await reattaching)) return null;
    return stream.closed ? null : stream;
  };
  const input = stdinTty ? pumpStdin(current, tty ? detachKeys : undefined) : pumpStdinBulk(stream);
  void input.catch(() => undefined);

  try {
    const code = await done;
    if (detached && ptyId) {
      const reattach = opts.reattach ?? `hutch pty attach ${box} ${ptyId}`;
      process.stderr.write(
        opts.recorded
          ? `\r\n[detached; it keeps running and every byte is logged]\r\n  what was recorded: ${opts.recorded}\r\n  reattach: ${reattach}\r\n`
          : `\r\n[detached from ${ptyId}; reattach: ${reattach}]\r\n`,
      );
    }
    return code;
  } finally {
    for (const c of cleanups) c();
    close();
  }
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
