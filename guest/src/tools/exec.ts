// exec: a process on pipes. stdout/stderr are read only as fast as the host
// grants credit, and stdin is credited back only once the process has taken
// the bytes, so neither direction buffers more than one window.
import { Value } from "@sinclair/typebox/value";
import { Chan, HostMsg, type MuxStream } from "@hutch/shared/wire";
import { shortSignal, signalName } from "../procs.ts";
import type { Req } from "./base.ts";
import type { ToolContext } from "./context.ts";
import { takeFrames } from "./inbox.ts";
import { spawnCwd, spawnEnv, spawnError, spawnIdentity } from "./spawn.ts";

export async function runExec(stream: MuxStream, req: Req<"exec">, ctx: ToolContext): Promise<void> {
  const cwd = await spawnCwd(ctx.config, req);
  if (typeof cwd !== "string") return stream.close(cwd);
  const who = spawnIdentity(ctx.config, req);
  if ("code" in who) return stream.close(who);
  if (stream.closed) return;
  let proc: Bun.Subprocess<"pipe", "pipe", "pipe">;
  try {
    proc = Bun.spawn(req.argv, {
      cwd,
      env: spawnEnv(ctx.config, req, {}, who),
      // Bun takes uid and gid (setgid, setgroups, setuid in the child) though its types do not say so.
      ...({ uid: who.uid, gid: who.gid } as object),
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      // Own process group, so a signal reaches the children of a shell too.
      detached: true,
    });
  } catch (err) {
    return stream.close(spawnError(req.argv[0] ?? "", err));
  }
  ctx.procs.add(proc);
  ctx.log.debug("exec started", { stream: stream.id, pid: proc.pid });

  let finished = false;
  const stdin = new StdinPump(proc.stdin, (n) => stream.consumed(n));
  stream.msg({ type: "started", pid: proc.pid });
  takeFrames(
    stream,
    {
      data: (chan, bytes) => {
        if (chan === Chan.stdin) stdin.push(bytes);
      },
      eof: (chan) => {
        if (chan === Chan.stdin) stdin.end();
      },
      msg: (msg) => {
        if (!Value.Check(HostMsg, msg) || msg.type !== "signal") {
          return stream.close({ code: "invalid", message: 'exec accepts only {type:"signal", signal} messages' });
        }
        const sig = signalName(msg.signal);
        if (!sig) return stream.close({ code: "invalid", message: `signal: unknown signal ${msg.signal}` });
        ctx.procs.signal(proc.pid, sig);
      },
      close: () => {
        if (finished) return;
        // The host is gone or gave up: nobody will read the output.
        ctx.procs.signal(proc.pid, "SIGKILL");
        stdin.abandon();
      },
    },
    false,
  );

  await Promise.all([pumpOut(proc.stdout, Chan.stdout, stream), pumpOut(proc.stderr, Chan.stderr, stream), proc.exited]);
  finished = true;
  stdin.abandon();
  if (stream.closed) return;
  stream.msg({ type: "exit", code: proc.exitCode, signal: shortSignal(proc.signalCode) });
  stream.close();
  ctx.log.debug("exec exited", { stream: stream.id, pid: proc.pid, code: proc.exitCode, signal: proc.signalCode });
}

/** Copies one pipe to a channel, reading the next chunk only after the last was sent. */
async function pumpOut(readable: ReadableStream<Uint8Array>, chan: number, stream: MuxStream): Promise<void> {
  const reader = readable.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (!(await stream.write(chan, value))) {
      await reader.cancel().catch(() => {});
      return;
    }
  }
  stream.eof(chan);
}

/**
 * Feeds the process's stdin in order. Frames that arrive while a flush is in
 * progress are batched into the next one; credit for a batch is returned
 * after the flush, so the host can have at most one window in flight.
 */
class StdinPump {
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private writing = false;
  private ending = false;
  private broken = false;

  constructor(
    private readonly sink: Bun.FileSink,
    private readonly credit: (n: number) => void,
  ) {}

  push(bytes: Uint8Array): void {
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    if (!this.writing) void this.run();
  }

  end(): void {
    this.ending = true;
    if (!this.writing) void this.run();
  }

  /** The process is gone or the stream closed: drop what is queued. */
  abandon(): void {
    this.pending = [];
    this.pendingBytes = 0;
    if (!this.broken) this.close();
  }

  private async run(): Promise<void> {
    this.writing = true;
    while (this.pending.length > 0) {
      const batch = this.pending;
      const n = this.pendingBytes;
      this.pending = [];
      this.pendingBytes = 0;
      if (!this.broken) {
        try {
          for (const b of batch) this.sink.write(b);
          await this.sink.flush();
        } catch {
          // The process closed its stdin (EPIPE): like a pipe, further input is discarded.
          this.broken = true;
        }
      }
      this.credit(n);
    }
    this.writing = false;
    if (this.ending && !this.broken) this.close();
  }

  private close(): void {
    this.broken = true;
    try {
      const r = this.sink.end();
      if (r instanceof Promise) r.catch(() => {});
    } catch {
      // Already closed by the process exiting.
    }
  }
}
