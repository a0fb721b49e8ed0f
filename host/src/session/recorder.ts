// The daemon's own attachment to every open session's terminal: it records
// all output into the log (bytes beside it, in pty_chunks), whether or not
// anyone watches, and is how `session send` types into the terminal. The
// bytes kept are capped per session, box and user (the store drops the
// oldest); each drop is logged as output.dropped in the session it cut.
import { emit, Events, follow, HutchError, type Actor, type ExitMsg, type MuxStream } from "@hutch/shared";
import type { NewEvent, PtyCaps, SessionRow, SessionLog } from "../store/types.ts";
import type { BoxService } from "../box/service.ts";
import { SYSTEM } from "../actors.ts";
import { Listeners } from "../listeners.ts";
import { log } from "../log.ts";
import { env } from "../env.ts";

const logger = log.create({ service: "recorder" });

interface Live {
  stream: MuxStream;
  pty: string;
}

/** How an agent session's terminal starts (argv, env, cwd), when it is not the stored argv as is; null for that. */
export type TerminalSpawner = (row: SessionRow) => Promise<{ argv: string[]; env: Record<string, string>; cwd: string } | null>;

/** What the recorder needs of the session log. */
export interface SessionSink {
  /** Logs events without waiting (SessionService.log). */
  log(sessionId: string, events: NewEvent[]): void;
  close(sessionId: string, actor: Actor, reason: string): Promise<unknown>;
  isHeadless(row: SessionRow): boolean;
}

export class Recorder {
  private readonly live = new Map<string, Live>();
  private readonly opening = new Map<string, Promise<Live>>();
  /** A new terminal's process started (not a re-attach). */
  readonly started = new Listeners<[row: SessionRow, pid: number]>("terminal started");

  constructor(
    private readonly store: SessionLog,
    private readonly sessions: SessionSink,
    private readonly boxes: BoxService,
    private readonly spawn: TerminalSpawner = async () => null,
    private readonly caps: PtyCaps = env.ptyMaxBytes(),
  ) {}

  /** Re-attaches to the terminals of every open session whose box runs (daemon start). */
  async recover(): Promise<void> {
    for (const row of this.store.list({ state: "open" })) {
      if (this.boxes.byId(row.box_id)?.state !== "running" || this.sessions.isHeadless(row)) continue;
      await this.ensurePty(row, { cols: 80, rows: 24 }).catch((err) =>
        logger.warn("could not re-attach a session", { session: row.id, err }),
      );
    }
  }

  /** Makes sure the session has a running terminal we record; starts one if it has none. */
  ensurePty(row: SessionRow, size: { cols: number; rows: number }): Promise<Live> {
    const have = this.live.get(row.id);
    if (have && !have.stream.closed) return Promise.resolve(have);
    let pending = this.opening.get(row.id);
    if (!pending) {
      pending = this.open(row, size).finally(() => this.opening.delete(row.id));
      this.opening.set(row.id, pending);
    }
    return pending;
  }

  async write(row: SessionRow, bytes: Uint8Array): Promise<void> {
    const live = await this.ensurePty(this.store.get(row.id)!, { cols: 80, rows: 24 });
    await live.stream.write(0, bytes);
  }

  async stop(row: SessionRow): Promise<void> {
    const live = this.live.get(row.id);
    this.live.delete(row.id);
    live?.stream.close();
    if (!row.pty) return;
    try {
      const { channel } = this.boxes.channel(row.box_id);
      const s = channel.mux.open({ tool: "pty.kill", id: row.pty, signal: "HUP" });
      s.handlers = {};
    } catch {
      // the box is not running: its terminal is gone already
    }
  }

  private async open(row: SessionRow, size: { cols: number; rows: number }): Promise<Live> {
    const { channel } = await this.boxes.awake(row.box_id);
    if (row.pty) {
      try {
        return await this.follow(row.id, channel.mux.open({ tool: "pty.attach", id: row.pty, ...size }));
      } catch (err) {
        if (!(err instanceof HutchError && err.code === "not_found")) throw err;
        // The terminal is gone (the box restarted): the session goes on in a new one.
      }
    }
    const spec = await this.spawn(row);
    const argv = spec?.argv ?? (JSON.parse(row.argv) as string[]);
    const live = await this.follow(
      row.id,
      channel.mux.open({ tool: "pty.open", argv, ...(spec ? { env: spec.env, cwd: spec.cwd } : {}), ...size }),
      argv,
    );
    this.store.update(row.id, { pty: live.pty });
    return live;
  }

  /** Follows a terminal stream: records its output; resolves once it started. */
  private follow(sessionId: string, stream: MuxStream, argv?: string[]): Promise<Live> {
    let redraw = 0;
    return new Promise((resolve, reject) => {
      void follow(stream, {
        // The terminal's input is ours to write (session send, attach), for as long as it runs.
        stdin: "open",
        onStarted: (m) => {
          if (!m.pty) return;
          const live = { stream, pty: m.pty };
          this.live.set(sessionId, live);
          if (argv) {
            this.sessions.log(sessionId, [{ ...emit(Events.execStarted, { argv, pid: m.pid }), actor: SYSTEM }]);
            const row = this.store.get(sessionId);
            if (row) this.started.emit(row, m.pid);
          }
          resolve(live);
        },
        onMessage: (m) => {
          if (m.type === "screen") redraw = m.bytes;
          else if (m.type === "exit") void this.exited(sessionId, m);
        },
        onData: (_chan, bytes) => {
          const snapshot = redraw > 0;
          redraw = Math.max(0, redraw - bytes.length);
          this.record(sessionId, bytes, snapshot);
        },
      }).then(({ started, error }) => {
        if (this.live.get(sessionId)?.stream === stream) this.live.delete(sessionId);
        if (!started?.pty)
          reject(
            error
              ? new HutchError(error.code === "not_found" ? "not_found" : "failed", error.message)
              : new HutchError("failed", "the terminal ended before it started"),
          );
      });
    });
  }

  private record(sessionId: string, bytes: Uint8Array, snapshot: boolean): void {
    this.store.transaction(() => {
      const chunk = this.store.addChunk(sessionId, bytes);
      this.sessions.log(sessionId, [
        {
          ...emit(Events.outputAppended, { chunk, offset: 0, length: bytes.length, ...(snapshot ? { snapshot: true } : {}) }),
          actor: SYSTEM,
        },
      ]);
      for (const { sessionId: cut, ...d } of this.store.trimChunks(sessionId, this.caps)) {
        this.sessions.log(cut, [{ ...emit(Events.outputDropped, d), actor: SYSTEM }]);
      }
    });
  }

  private async exited(sessionId: string, m: ExitMsg): Promise<void> {
    this.live.delete(sessionId);
    this.sessions.log(sessionId, [{ ...emit(Events.execExited, { code: m.code, signal: m.signal }), actor: SYSTEM }]);
    const row = this.store.get(sessionId);
    if (row?.state === "open") {
      await this.sessions.close(sessionId, SYSTEM, `the terminal's process exited (${m.signal ? `signal ${m.signal}` : `code ${m.code}`})`);
    }
  }
}
