// A sandbox's processes, as envd's process service sees them: each is one
// exec (or pty.open) stream on the box's channel, the same tool `hutch exec`
// opens, held by the daemon for as long as the process runs. Whoever is
// subscribed (the Start call, then any Connect) gets its events from then on;
// as in envd, nothing is replayed to a later Connect, and with no subscriber
// the output is dropped (flow control is the channel's credit, never a queue
// here). A process leaves the table when its stream closes.
import {
  follow,
  HutchError,
  type MuxStream,
  type ProcessConfig,
  type ProcessEvent,
  type ProcessInfo,
  type ProcessSelector,
} from "@hutch/shared";
import type { Channel } from "../engine/channel.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "e2b.process" });
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");

export type Subscriber = (e: ProcessEvent) => void;

export interface StartOptions {
  config: ProcessConfig;
  /** Sandbox-wide variables, under the process's own. */
  envs: Record<string, string>;
  stdin: boolean;
  pty?: { cols: number; rows: number };
  tag?: string;
  user?: "hutch" | "root";
}

class Proc {
  readonly subscribers = new Set<Subscriber>();
  constructor(
    readonly pid: number,
    readonly info: ProcessInfo,
    readonly stream: MuxStream,
    readonly pty: boolean,
  ) {}

  emit(e: ProcessEvent): void {
    for (const s of this.subscribers) s(e);
  }
}

export class ProcessTable {
  private readonly procs = new Map<number, Proc>();

  constructor(private readonly box: string) {}

  /**
   * Starts a process; `first` is subscribed before anything can happen, so it
   * sees the start event and everything after. Resolves with the pid once the
   * process runs; a process that cannot start is an error (its command named).
   */
  async start(channel: Channel, o: StartOptions, first: Subscriber): Promise<number> {
    const argv = [o.config.cmd, ...(o.config.args ?? [])];
    const env = { ...o.envs, ...(o.config.envs ?? {}) };
    const common = {
      argv,
      ...(Object.keys(env).length > 0 ? { env } : {}),
      ...(o.config.cwd ? { cwd: o.config.cwd } : {}),
      ...(o.user ? { user: o.user } : {}),
    };
    const stream = channel.mux.open(
      o.pty ? { tool: "pty.open", ...common, cols: o.pty.cols, rows: o.pty.rows } : { tool: "exec", ...common },
    );
    const pending: ProcessEvent[] = [];
    let proc: Proc | undefined;
    const emit = (e: ProcessEvent) => (proc ? proc.emit(e) : pending.push(e));
    let started: (pid: number) => void = () => {};
    const running = new Promise<number>((resolve) => (started = resolve));
    const done = follow(stream, {
      ...(o.stdin || o.pty ? { stdin: "open" as const } : {}),
      onStarted: (m) => {
        proc = new Proc(
          m.pid,
          {
            config: {
              cmd: o.config.cmd,
              args: o.config.args ?? [],
              envs: o.config.envs ?? {},
              ...(o.config.cwd ? { cwd: o.config.cwd } : {}),
            },
            pid: m.pid,
            ...(o.tag ? { tag: o.tag } : m.pty ? { tag: m.pty } : {}),
          },
          stream,
          !!o.pty,
        );
        proc.subscribers.add(first);
        this.procs.set(m.pid, proc);
        logger.info("exec", { box: this.box, pid: m.pid, tool: o.pty ? "pty.open" : "exec" });
        proc.emit({ start: { pid: m.pid } });
        for (const e of pending.splice(0)) proc.emit(e);
        started(m.pid);
      },
      onData: (chan, bytes) => {
        const out = b64(bytes);
        emit({ data: o.pty ? { pty: out } : chan === 1 ? { stdout: out } : { stderr: out } });
      },
    });
    // A command that starts and ends in one batch of frames can settle `done` first: it still ran.
    const end = await Promise.race([running.then(() => null), done]);
    if (end && !end.started) {
      const why = end.error?.message ?? "the process did not start";
      throw new HutchError(
        end.error?.code === "not_found" ? "not_found" : "invalid",
        `${argv[0]}: ${why}`,
        end.error?.hint ?? "check the command and its working directory",
      );
    }
    void done.then((e) => {
      const exit = e.exit;
      const code = exit?.code ?? -1;
      const status = exit?.signal ? `signal: ${exit.signal === "KILL" ? "killed" : exit.signal.toLowerCase()}` : `exit status ${code}`;
      const err = e.error?.message ?? (exit && code !== 0 ? status : undefined);
      proc?.emit({ end: { exitCode: code, exited: exit !== null && exit.signal === null, status, ...(err ? { error: err } : {}) } });
      if (proc) this.procs.delete(proc.pid);
    });
    return running;
  }

  list(): ProcessInfo[] {
    return [...this.procs.values()].map((p) => p.info);
  }

  private find(sel: ProcessSelector): Proc {
    const p = "pid" in sel ? this.procs.get(sel.pid) : [...this.procs.values()].find((x) => x.info.tag === sel.tag);
    if (!p)
      throw new HutchError(
        "not_found",
        `process ${"pid" in sel ? `with pid ${sel.pid}` : `tagged "${sel.tag}"`} not found`,
        "list processes: commands.list()",
      );
    return p;
  }

  /** Subscribes to a running process; returns what ends the subscription. */
  connect(sel: ProcessSelector, s: Subscriber): { pid: number; off(): void } {
    const p = this.find(sel);
    p.subscribers.add(s);
    return { pid: p.pid, off: () => p.subscribers.delete(s) };
  }

  unsubscribe(pid: number, s: Subscriber): void {
    this.procs.get(pid)?.subscribers.delete(s);
  }

  async input(sel: ProcessSelector, bytes: Uint8Array): Promise<void> {
    await this.find(sel).stream.write(0, bytes);
  }

  closeStdin(sel: ProcessSelector): void {
    this.find(sel).stream.eof(0);
  }

  signal(sel: ProcessSelector, signal: "TERM" | "KILL"): void {
    this.find(sel).stream.msg({ type: "signal", signal });
  }

  resize(sel: ProcessSelector, cols: number, rows: number): void {
    const p = this.find(sel);
    if (!p.pty) throw new HutchError("invalid", `process ${p.pid} has no terminal to resize`, "resize a process started with a pty");
    p.stream.msg({ type: "resize", cols, rows });
  }

  /** Ends every stream (the sandbox is going away); the processes end with the box. */
  close(): void {
    for (const p of this.procs.values()) p.stream.close();
    this.procs.clear();
  }
}
