// Guest-owned terminals. A PTY outlives the streams attached to it: closing
// a stream (or losing the connection) detaches, and the process keeps
// running until it exits or is killed.
import { Value } from "@sinclair/typebox/value";
import { Chan, HostMsg, newId, type ExitMsg, type MuxStream, type PtyInfo } from "@hutch/shared/wire";
import type { GuestConfig } from "../config.ts";
import type { Logger } from "../log.ts";
import { shortSignal, signalName, type ProcessTable } from "../procs.ts";
import type { Req } from "./base.ts";
import { takeFrames } from "./inbox.ts";
import { Attachment } from "./pty-attachment.ts";
import type { Screen } from "./pty-screen.ts";
import { spawnCwd, spawnEnv, spawnError, spawnIdentity, type SpawnIdentity } from "./spawn.ts";

/** How long output may still drain after the process exited (a background job can hold the terminal open). */
const EOF_GRACE_MS = 1000;

class PtySession {
  readonly attachments = new Set<Attachment>();
  readonly startedAt = new Date().toISOString();
  proc!: Bun.Subprocess;
  private sawEof!: Promise<void>;

  constructor(
    readonly id: string,
    readonly argv: string[],
    public cols: number,
    public rows: number,
    private readonly stallMs: number,
    readonly screen: Screen,
  ) {}

  start(cwd: string, env: Record<string, string>, who: SpawnIdentity): void {
    let eof!: () => void;
    this.sawEof = new Promise((resolve) => (eof = resolve));
    this.proc = Bun.spawn(this.argv, {
      cwd,
      env,
      ...({ uid: who.uid, gid: who.gid } as object),
      terminal: {
        cols: this.cols,
        rows: this.rows,
        data: (_term, bytes) => this.output(bytes),
        exit: () => eof(),
      },
    });
  }

  get info(): PtyInfo {
    return {
      id: this.id,
      argv: this.argv,
      pid: this.proc.pid,
      cols: this.cols,
      rows: this.rows,
      startedAt: this.startedAt,
      attached: this.attachments.size,
    };
  }

  private output(bytes: Uint8Array): void {
    this.screen.write(bytes);
    for (const a of this.attachments) a.send(bytes);
  }

  resize(cols: number, rows: number): void {
    if (cols === this.cols && rows === this.rows) return;
    this.cols = cols;
    this.rows = rows;
    this.proc.terminal?.resize(cols, rows);
    this.screen.resize(cols, rows);
  }

  attach(stream: MuxStream, withSnapshot: boolean): Attachment {
    const a = new Attachment(
      stream,
      () => this.screen.snapshot(),
      (x) => this.attachments.delete(x),
      this.stallMs,
      withSnapshot,
    );
    this.attachments.add(a);
    takeFrames(
      stream,
      {
        // Bun's Terminal.write buffers whatever the process has not read yet,
        // so input is credited at once; it is typed or pasted, not piped.
        data: (chan, bytes) => {
          if (chan === Chan.stdin && !this.proc.terminal?.closed) this.proc.terminal?.write(bytes);
        },
        msg: (msg) => {
          if (!Value.Check(HostMsg, msg) || msg.type !== "resize") {
            return stream.close({ code: "invalid", message: 'a pty accepts only {type:"resize", cols, rows} messages' });
          }
          this.resize(msg.cols, msg.rows);
        },
        credit: () => a.credited(),
        close: () => this.attachments.delete(a),
      },
      true,
    );
    return a;
  }

  /** Resolves with the exit message once the process exited and its output drained. */
  async waitExit(): Promise<ExitMsg> {
    await this.proc.exited;
    await Promise.race([this.sawEof, Bun.sleep(EOF_GRACE_MS)]);
    return { type: "exit", code: this.proc.exitCode, signal: shortSignal(this.proc.signalCode) };
  }
}

export class PtyTable {
  private readonly sessions = new Map<string, PtySession>();

  constructor(
    private readonly config: GuestConfig,
    private readonly procs: ProcessTable,
    private readonly log: Logger,
  ) {}

  list(): PtyInfo[] {
    return [...this.sessions.values()].map((s) => s.info);
  }

  async open(stream: MuxStream, req: Req<"pty.open">): Promise<void> {
    const cwd = await spawnCwd(this.config, req);
    if (typeof cwd !== "string") return stream.close(cwd);
    const who = spawnIdentity(this.config, req);
    if ("code" in who) return stream.close(who);
    // xterm.js is loaded with the first PTY, not at start: evaluating it costs
    // PID 1 about 3 MiB of idle RSS in a box that may never open a terminal.
    const { Screen } = await import("./pty-screen.ts");
    const session = new PtySession(newId("pty"), req.argv, req.cols, req.rows, this.config.ptyStallMs, new Screen(req.cols, req.rows));
    try {
      session.start(cwd, spawnEnv(this.config, req, { TERM: "xterm-256color" }, who), who);
    } catch (err) {
      session.screen.dispose();
      return stream.close(spawnError(req.argv[0] ?? "", err));
    }
    this.sessions.set(session.id, session);
    this.procs.add(session.proc);
    this.log.info("pty started", { pty: session.id, pid: session.proc.pid });
    stream.msg({ type: "started", pid: session.proc.pid, pty: session.id });
    session.attach(stream, false);
    void this.reap(session);
  }

  attach(stream: MuxStream, req: Req<"pty.attach">): void {
    const session = this.sessions.get(req.id);
    if (!session) return stream.close({ code: "not_found", message: `no pty ${req.id}; list them with pty.list` });
    if (req.cols !== undefined || req.rows !== undefined) session.resize(req.cols ?? session.cols, req.rows ?? session.rows);
    stream.msg({ type: "started", pid: session.proc.pid, pty: session.id });
    session.attach(stream, true);
  }

  kill(stream: MuxStream, req: Req<"pty.kill">): void {
    const session = this.sessions.get(req.id);
    if (!session) return stream.close({ code: "not_found", message: `no pty ${req.id}; list them with pty.list` });
    const sig = signalName(req.signal ?? "TERM");
    if (!sig) return stream.close({ code: "invalid", message: `signal: unknown signal ${req.signal}` });
    this.procs.signal(session.proc.pid, sig);
    stream.msg({ type: "result", value: { id: session.id, pid: session.proc.pid, signal: shortSignal(sig) } });
    stream.close();
  }

  private async reap(session: PtySession): Promise<void> {
    const exit = await session.waitExit();
    this.sessions.delete(session.id);
    for (const a of session.attachments) a.finish(exit);
    session.attachments.clear();
    session.proc.terminal?.close();
    const { dropped } = session.screen;
    session.screen.dispose();
    // Output the screen skipped in a flood went to the attachments all the same; only a reattach's replay missed it.
    this.log.info("pty exited", { pty: session.id, code: exit.code, signal: exit.signal, ...(dropped ? { screenDropped: dropped } : {}) });
  }
}
