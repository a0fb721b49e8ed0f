// A warm headless agent: one agent process kept for a session's prompts
// (Claude Code's stream-json input, the Agent SDK's streaming mode), so a
// follow-up is a line on its stdin rather than a new process that starts,
// prepares and reloads its conversation. One turn at a time; each turn gets
// a new mapper, so its events are the ones a per-prompt run logs for it, and
// it ends at the agent's own end of turn, not at the process's exit. The
// process itself is logged once: exec.started (marked warm) when it starts,
// exec.exited when it ends, whenever that is. It ends when it is told to
// (its session closed, its box left running), after WARM_IDLE_MS without a
// prompt, or when it dies; the next prompt then starts another, resuming the
// conversation as a per-prompt run does.
import { emit, Events, HutchError, type MuxStream, type StreamEnd } from "@hutch/shared";
import { execIn } from "../box/exec.ts";
import { agentCommand, GUEST_AGENTS_DIR } from "./install.ts";
import { LineSplitter } from "./lines.ts";
import { raw } from "./limits.ts";
import type { BoxMcp } from "./mcp-link.ts";
import { STDERR_TAIL, type AgentRunner, type RunOptions, type RunResult } from "./run.ts";
import type { Mapper, MappedEvent } from "./types.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "harness" });

/**
 * How long a warm agent waits for its session's next prompt before it is
 * ended (stdin closed: it exits by itself). An idle Claude Code holds ~200
 * MB in its box (measured, 2.1.332); ten minutes covers a person reading an
 * answer and typing the next prompt, not a session left open overnight.
 */
export const WARM_IDLE_MS = 10 * 60_000;

export type WarmOptions = Omit<RunOptions, "prompt" | "resume" | "signal" | "permissions">;

interface Turn {
  mapper: Mapper;
  end(r: RunResult): void;
  /** Set once an interrupt was asked for: the process is stopped if the turn has not ended by then. */
  deadline?: ReturnType<typeof setTimeout>;
}

const ended = (events: MappedEvent[]) =>
  events.some((e) => e.kind === Events.agentState.kind && (e.data as { state: string }).state !== "busy");

export class WarmAgent {
  private stream: MuxStream | null = null;
  private turn: Turn | null = null;
  private stopAsked = false;
  private ending = false;
  private idle?: ReturnType<typeof setTimeout>;
  private killTimer?: ReturnType<typeof setTimeout>;
  private readonly record: (events: MappedEvent[]) => void;
  private goneNow!: () => void;
  /** Resolves once the process is gone (or could not start): a new WarmAgent serves the next prompt. */
  readonly gone = new Promise<void>((res) => {
    this.goneNow = () => {
      this.isGone = true;
      res();
    };
  });
  private isGone = false;
  /** A start before the first prompt (warmUp) under way: resolves once the agent answered, or could not start. */
  private starting: Promise<void> | null = null;
  private readyId: string | null = null;
  private readyNow?: () => void;
  /** What a start before the first prompt shaped from an empty one (a hand-over note), written before that prompt. */
  private prefix = "";

  /** It can take a prompt: not gone, and not being ended (an idle limit reached just now closes its stdin). */
  get usable(): boolean {
    return !this.isGone && !this.ending;
  }

  constructor(
    private readonly runner: AgentRunner,
    private readonly o: WarmOptions,
  ) {
    if (!o.harness.warm) throw new HutchError("invalid", `${o.harness.name} cannot be kept between prompts`);
    this.record = runner.emitter(o.harness, o.actor, o.sink);
  }

  /**
   * One turn: resolves when it has ended in the log (the agent's end of turn,
   * or the process's end). Aborting `signal` interrupts the turn (the
   * harness's interrupt request; the process is stopped if that does not end
   * it within the harness's grace period).
   */
  /**
   * Starts the process before the first prompt (an editor's new session, as
   * the Agent SDK does) and resolves once it answers a request, so that
   * prompt meets a ready agent; or once it could not start, which is only
   * logged here: the first prompt then starts it and logs why it fails.
   */
  warmUp(timeoutMs = 30_000): Promise<void> {
    if (this.stream || this.starting || !this.usable) return this.starting ?? Promise.resolve();
    this.starting = (async () => {
      const ready = new Promise<void>((res) => {
        this.readyNow = res;
      });
      const started = await this.launch(null, false);
      if (!started) return this.readyNow?.();
      const timer = setTimeout(() => this.readyNow?.(), timeoutMs);
      await ready;
      clearTimeout(timer);
    })().finally(() => {
      this.starting = null;
      this.readyId = null;
    });
    return this.starting;
  }

  async prompt(text: string, resume: boolean, signal?: AbortSignal): Promise<RunResult> {
    if (this.turn) throw new HutchError("conflict", `${this.o.harness.name} is still working on its turn`);
    clearTimeout(this.idle);
    const h = this.o.harness;
    const done = new Promise<RunResult>((end) => {
      this.turn = { mapper: h.mapper(), end };
    });
    const stop = () => this.interrupt();
    if (signal?.aborted) this.stopAsked = true;
    else signal?.addEventListener("abort", stop, { once: true });
    if (this.starting) await this.starting;
    if (this.isGone) this.fail(`${h.name} ended before the prompt reached it; send the prompt again`);
    else if (this.stream) {
      this.record([emit(Events.agentState, { state: "busy", reason: `sending the prompt to ${h.name}` })]);
      void this.stream.write(0, new TextEncoder().encode(h.warm!.message(this.prefix + text)));
      this.prefix = "";
      if (this.stopAsked) this.interrupt();
    } else {
      this.record([emit(Events.agentState, { state: "busy", reason: `starting ${h.name}` })]);
      await this.launch(text, resume);
    }
    const r = await done;
    signal?.removeEventListener("abort", stop);
    if (this.stream && !this.ending) this.idle = setTimeout(() => void this.end(), WARM_IDLE_MS);
    return r;
  }

  /** Ends the process (stdin closed, then its stop signal, then the stream) and resolves once it is gone. Idempotent. */
  async end(): Promise<void> {
    this.ending = true;
    clearTimeout(this.idle);
    if (this.stream && !this.killTimer) {
      this.stream.eof(0);
      this.killTimer = setTimeout(() => this.kill(), this.o.harness.stop.graceMs);
    }
    await this.gone;
  }

  private interrupt(): void {
    const t = this.turn;
    if (!t) return;
    if (!this.stream) {
      this.stopAsked = true;
      return;
    }
    const h = this.o.harness;
    void this.stream.write(0, new TextEncoder().encode(h.warm!.interrupt(crypto.randomUUID())));
    t.deadline ??= setTimeout(() => this.kill(), h.stop.graceMs);
  }

  /** Stops the process the way a per-prompt run is stopped: its signal, then the stream closed (the guest kills what is left). */
  private kill(): void {
    const s = this.stream;
    if (!s) return;
    s.msg({ type: "signal", signal: this.o.harness.stop.signal });
    clearTimeout(this.killTimer);
    this.killTimer = setTimeout(() => s.close(), this.o.harness.stop.graceMs);
  }

  private endTurn(r: RunResult): void {
    const t = this.turn;
    if (!t) return;
    clearTimeout(t.deadline);
    this.turn = null;
    t.end(r);
  }

  /** The turn could not start: logged as a per-prompt run logs it, and this agent is gone. */
  private fail(message: string): void {
    this.record([
      emit(Events.errorRaised, { message, code: "agent-start" }),
      emit(Events.agentState, { state: "error", reason: message.slice(0, 1024) }),
      emit(Events.attentionRequired, { reason: message.slice(0, 1024) }),
    ]);
    this.goneNow();
    this.endTurn({ exit: null });
  }

  private line(line: string, truncated: boolean): void {
    if (truncated) return this.record([raw(line, "unparsed")]);
    const h = this.o.harness;
    const answered = h.warm!.control(line);
    if (answered !== null) {
      if (answered === this.readyId) this.readyNow?.();
      return;
    }
    // Between turns nothing should come; what does is still logged, through a mapper of its own.
    const t = this.turn ?? { mapper: h.mapper(), end: () => {} };
    const events = t.mapper.line(line);
    this.record(events);
    if (this.turn && ended(events)) this.endTurn({ exit: null });
  }

  /** Starts the process; with a prompt, writes it once it runs; with none (warmUp), asks it to say when it is ready. False: it could not start. */
  private async launch(text: string | null, resume: boolean): Promise<boolean> {
    const o = this.o;
    const h = o.harness;
    const mcp = await this.runner.openMcp(o.boxId, h, o.actor, o.sink).catch(() => null);
    let stream: MuxStream;
    let done: Promise<StreamEnd>;
    let stderr = "";
    let startedNow: (ok: boolean) => void = () => {};
    const started = new Promise<boolean>((res) => {
      startedNow = res;
    });
    const splitter = new LineSplitter((line, truncated) => this.line(line, truncated));
    try {
      const spec = await this.runner.prepare({ ...o, mcp }, { prompt: text ?? "", resume, warm: true });
      ({ stream, done } = execIn(
        await this.runner.channelOf(o.boxId),
        { tool: "exec", argv: spec.argv, env: spec.env, cwd: spec.cwd },
        {
          stdin: "open",
          onStarted: (m) => {
            this.stream = stream;
            this.record([
              emit(Events.execStarted, {
                argv: [agentCommand(h, GUEST_AGENTS_DIR), `(${h.name} ${h.npm?.version} headless, warm)`],
                pid: m.pid,
                warm: true,
              }),
            ]);
            if (text === null) {
              this.prefix = spec.prompt ?? "";
              this.readyId = crypto.randomUUID();
              void stream.write(0, new TextEncoder().encode(h.warm!.ready(this.readyId)));
            } else void stream.write(0, new TextEncoder().encode(h.warm!.message(spec.prompt ?? text)));
            if (this.stopAsked || this.ending) this.kill();
            startedNow(true);
          },
          onData: (chan, bytes) => {
            if (chan === 1) splitter.push(bytes);
            else if (chan === 2) {
              const text = new TextDecoder().decode(bytes);
              stderr = (stderr + text).slice(-STDERR_TAIL);
              logger.debug(`${h.name}[stderr]: ${text.trimEnd()}`);
            }
          },
        },
      ));
    } catch (err) {
      mcp?.close();
      const e = err instanceof HutchError ? err : new HutchError("failed", (err as Error).message);
      if (text === null) {
        logger.warn("a warm agent could not start before its first prompt", { box: o.boxId, error: e.message });
        return false;
      }
      this.fail(`${e.message}${e.hint ? ` (next: ${e.hint})` : ""}`);
      return false;
    }
    void done.then((end) => {
      startedNow(false);
      this.exited(end, splitter, () => stderr, mcp);
      this.readyNow?.();
    });
    return started;
  }

  /** The process ended: a turn it left open ends as a per-prompt run's does, then exec.exited. */
  private exited(end: StreamEnd, splitter: LineSplitter, stderr: () => string, mcp: BoxMcp | null): void {
    const h = this.o.harness;
    this.stream = null;
    clearTimeout(this.idle);
    clearTimeout(this.killTimer);
    mcp?.close();
    if (!end.started) return this.fail(`${h.name} could not start: ${end.error?.message ?? "the box closed the stream"}`);
    splitter.end();
    const ex = end.exit ?? { code: null, signal: "lost" };
    const t = this.turn;
    if (t) {
      const last = t.mapper.end(ex);
      const tail = stderr().trim().split("\n").slice(-3).join(" | ");
      if (tail && (ex.code !== 0 || last.some((e) => e.kind === "agent.state" && e.data.state === "error")))
        this.record([raw(tail, "stderr")]);
      this.record(last);
    }
    this.record([emit(Events.execExited, { code: ex.code, signal: ex.signal })]);
    this.goneNow();
    this.endTurn({ exit: ex });
  }
}
