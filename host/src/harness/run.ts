// Runs a coding agent headless in a box and turns what it does into session
// events: the CLI's structured stdout goes line by line through its
// harness's mapper; every mapped event is checked against the registry (one
// that does not fit is kept as agent.raw, never dropped); stderr is kept as a
// bounded tail for the error a failed run reports. No HTTP here.
import { checkEvent, emit, Events, HANDOVER_MAX_BYTES, HANDOVER_PATH, HutchError, type Actor } from "@hutch/shared";
import { execCollect, execIn } from "../box/exec.ts";
import type { BoxService } from "../box/service.ts";
import type { EngineCapabilities } from "../engine/types.ts";
import type { NewEvent } from "../store/types.ts";
import { agentContext, type BrokerLink } from "./broker-link.ts";
import { agentArgv, agentCommand, GUEST_AGENTS_DIR, installAgent, installDirName, installedVersion } from "./install.ts";
import { join } from "node:path";
import { parseHandover, shapeTurn } from "./handover.ts";
import { LineSplitter } from "./lines.ts";
import { raw } from "./limits.ts";
import type { AgentContext, Harness, MappedEvent } from "./types.ts";
import { MCP_SERVER_NAME, openBoxMcp, type BoxMcp, type ToolApproval } from "./mcp-link.ts";
import { log } from "../log.ts";

const logger = log.create({ service: "harness" });

/** Where agents work inside a box. */
/**
 * What to do about an agent CLI missing in a box. Where the engine gives a box
 * its agent CLIs at boot, one installed on the host since it started is there
 * after a restart; otherwise it needs installing.
 */
export function missingAgentHint(
  agent: string,
  box: string,
  caps: Pick<EngineCapabilities, "agentsAtBoot">,
  installedOnHost: boolean,
): string {
  return caps.agentsAtBoot && installedOnHost
    ? `it was installed after the box started; restart the box to attach it: hutch box stop ${box} && hutch box start ${box}`
    : `install it: hutch agent install ${agent}`;
}

export const AGENT_WORKDIR = "/workspace";
export const STDERR_TAIL = 4096;

export interface RunSink {
  /** Appends events to the session log (the daemon stamps seq and time). */
  append(events: NewEvent[]): void;
}

export interface RunOptions {
  boxId: string;
  harness: Harness;
  prompt: string;
  model?: string;
  /** Continue the conversation of the box's last turn (a follow-up prompt in the same session). */
  resume: boolean;
  /** Who the agent's own events are attributed to. */
  actor: Actor;
  sink: RunSink;
  /** Host directory of installed agent CLIs. */
  agentsDir: string;
  /** Install a missing CLI with npm (off on hosts without the registry). */
  install: boolean;
  /** Aborting stops the agent: its harness's stop signal, then SIGKILL after the grace period. */
  signal?: AbortSignal;
  /** "ask": the agent asks a person (hutch approvals) before each tool call its permission check holds. */
  permissions?: "ask";
}

export interface Prepared {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  /** The transcript file an interactive agent will write, to be tailed. */
  transcript?: string;
  /** It holds a resumed conversation already: tail only what is added (the old turns are not this session's). */
  transcriptResumed?: boolean;
  /** A warm agent's first prompt, as the hand-over shaped it, to write on its stdin. */
  prompt?: string;
}

export interface RunResult {
  exit: { code: number | null; signal: string | null } | null;
}

/** Runs a command in the box to completion, with optional stdin; a stream that broke is a named error. */
async function execSmall(
  boxes: BoxService,
  boxId: string,
  argv: string[],
  stdin?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const r = await execCollect((await boxes.awake(boxId)).channel, argv, stdin);
  if (r.error) throw new HutchError("failed", `${argv[0]}: ${r.error}`);
  return r;
}

export class AgentRunner {
  /** Asks a person whether an agent in a box may use a tool (the daemon wires the approval service in). */
  toolApprovals?: (boxId: string, tool: string, input: unknown) => Promise<{ allow: boolean; message: string }>;

  constructor(
    private readonly boxes: BoxService,
    private readonly link: BrokerLink,
  ) {}

  /**
   * Prepares the box (CLI installed, config files written) and returns the
   * argv and environment for the agent. Throws a named error when it cannot.
   */
  async prepare(
    o: Omit<RunOptions, "prompt" | "sink" | "actor" | "resume"> & { mcp?: BoxMcp | null },
    mode: { prompt: string; resume: boolean; warm?: boolean } | "interactive",
  ): Promise<Prepared> {
    const h = o.harness;
    if (h.npm && o.install) await installAgent(h, o.agentsDir);
    const launch = agentArgv(h, GUEST_AGENTS_DIR);
    const command = launch.at(-1)!;
    const probe = await execSmall(this.boxes, o.boxId, [
      "sh",
      "-c",
      `printf "%s\\n" "$HOME"; for c; do [ -x "$c" ] || command -v "$c" >/dev/null 2>&1 || { echo missing; exit 0; }; done; echo present; head -c ${HANDOVER_MAX_BYTES + 1} "$HOME/${HANDOVER_PATH}" 2>/dev/null || true`,
      "sh",
      ...launch,
    ]);
    const [home, present, ...rest] = probe.stdout.split("\n");
    if (present !== "present") {
      const box = this.boxes.byId(o.boxId);
      const atBoot = this.boxes.capabilities(o.boxId)?.agentsAtBoot ?? false;
      const installed = atBoot && !!h.npm && installedVersion(join(o.agentsDir, installDirName(h)), h.npm) === h.npm.version;
      const hint = missingAgentHint(h.name, box?.name ?? o.boxId, { agentsAtBoot: atBoot }, installed);
      throw new HutchError(
        "not_found",
        `${h.name}: the agent CLI is not installed (${h.npm ? `${h.npm.name}@${h.npm.version}` : command} is missing in the box)`,
        hint,
      );
    }
    // What an offload left: where the repository is, the conversation to resume, the note to start with.
    const handover = parseHandover(rest.join("\n"), this.boxes.byId(o.boxId)?.name ?? o.boxId);
    const turn = shapeTurn(handover, h.name, {
      workdir: AGENT_WORKDIR,
      prompt: mode === "interactive" ? "" : mode.prompt,
      resume: mode === "interactive" ? false : mode.resume,
    });
    const link = await this.link.forBox(o.boxId, h.bindings);
    const mcp = o.mcp ? { name: MCP_SERVER_NAME, url: o.mcp.url, token: o.mcp.token } : undefined;
    const ctx: AgentContext = {
      ...agentContext(link, home || "/home/hutch", turn.workdir, o.model, mcp),
      ...(o.permissions === "ask" ? { permissions: "ask" as const } : {}),
    };
    for (const [rel, text] of Object.entries(h.files(ctx))) {
      const r = await execSmall(
        this.boxes,
        o.boxId,
        ["sh", "-c", 'umask 077 && mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", `${ctx.home}/${rel}`],
        text,
      );
      if (r.code !== 0)
        throw new HutchError("failed", `${h.name}: could not write ${rel} in the box: ${r.stderr.trim()}`, "check the box: hutch box info");
    }
    // A warm agent gets its (shaped) prompt on stdin once it runs.
    if (mode !== "interactive" && mode.warm && h.warm)
      return { argv: [...launch, ...h.warm.args(ctx, turn.resume)], env: h.env(ctx), cwd: ctx.workdir, prompt: turn.prompt };
    if (mode !== "interactive")
      return { argv: [...launch, ...h.headless(turn.prompt, ctx, turn.resume)], env: h.env(ctx), cwd: ctx.workdir };
    // The TUI resumes a carried conversation when its harness can name one (its transcript is then tailed from its end).
    const resumed = typeof turn.resume === "string" && h.transcript !== undefined;
    const agentSession = resumed ? (turn.resume as string) : crypto.randomUUID();
    return {
      argv: [...launch, ...h.interactive(ctx), ...(h.transcript ? h.transcript.args(agentSession, resumed) : [])],
      env: h.env(ctx),
      cwd: ctx.workdir,
      ...(h.transcript ? { transcript: h.transcript.path(ctx, agentSession), transcriptResumed: resumed } : {}),
    };
  }

  /**
   * The box's MCP server for one agent run, its calls logged as the agent;
   * null when the box cannot serve one (the agent then runs without it).
   */
  async openMcp(boxId: string, h: Harness, actor: Actor, sink: RunSink, ask = false): Promise<BoxMcp | null> {
    if (h.npm === null) return null;
    const approvals = this.toolApprovals;
    const approve: ToolApproval | undefined = ask && approvals ? (tool, input) => approvals(boxId, tool, input) : undefined;
    return openBoxMcp((await this.boxes.awake(boxId)).channel, actor.id, this.emitter(h, actor, sink), approve);
  }

  /** The box's channel, woken if it sleeps. */
  async channelOf(boxId: string) {
    return (await this.boxes.awake(boxId)).channel;
  }

  /** Calls `then` once the process `pid` in the box is gone (or the box's channel closed). */
  whileRuns(boxId: string, pid: number, then: () => void): void {
    try {
      const { done } = execIn(this.boxes.channel(boxId).channel, {
        tool: "exec",
        argv: ["sh", "-c", 'while kill -0 "$1" 2>/dev/null; do sleep 2; done', "sh", String(pid)],
      });
      void done.then(then, then);
    } catch {
      then();
    }
  }

  /** Checks mapped events against the registry and logs them as the agent; one that does not fit is kept raw. */
  emitter(h: Harness, actor: Actor, sink: RunSink) {
    return (events: MappedEvent[]) => {
      if (events.length === 0) return;
      sink.append(
        events.map((e) => {
          const problem = checkEvent(e.kind, e.data);
          if (!problem) return { ...e, actor };
          logger.warn("mapped event does not fit its kind; kept raw", { agent: h.name, kind: e.kind, problem });
          return { ...raw(JSON.stringify(e), "invalid"), actor };
        }),
      );
    };
  }

  /**
   * Follows an interactive agent's transcript file in the box (tail -F,
   * ending with the agent's process), mapping its records into the log while
   * the user types in the terminal, attached or not.
   */
  tail(o: { boxId: string; harness: Harness; path: string; fromEnd?: boolean; pid: number; actor: Actor; sink: RunSink }): void {
    const t = o.harness.transcript;
    if (!t) return;
    const record = this.emitter(o.harness, o.actor, o.sink);
    const mapper = t.mapper();
    const splitter = new LineSplitter((line, truncated) => record(truncated ? [raw(line, "unparsed")] : mapper.line(line)));
    const { done } = execIn(
      this.boxes.channel(o.boxId).channel,
      { tool: "exec", argv: ["tail", "-n", o.fromEnd ? "0" : "+1", "-F", `--pid=${o.pid}`, o.path] },
      {
        onData: (chan, bytes) => {
          if (chan === 1) splitter.push(bytes);
        },
      },
    );
    void done.then((end) => {
      splitter.end();
      if (end.error) logger.warn("transcript tail ended", { agent: o.harness.name, error: end.error.message });
    });
  }

  /** One headless turn: resolves when the agent process ends (or could not start). */
  async run(o: RunOptions): Promise<RunResult> {
    const h = o.harness;
    const record = this.emitter(h, o.actor, o.sink);
    const fail = (message: string): RunResult => {
      record([
        emit(Events.errorRaised, { message, code: "agent-start" }),
        emit(Events.agentState, { state: "error", reason: message.slice(0, 1024) }),
        emit(Events.attentionRequired, { reason: message.slice(0, 1024) }),
      ]);
      return { exit: null };
    };

    record([emit(Events.agentState, { state: "busy", reason: `starting ${h.name}` })]);
    // Which agents can ask is checked where a session is made (SessionService.create); follow-ups inherit it.
    const ask = o.permissions === "ask";
    const mcp = await this.openMcp(o.boxId, h, o.actor, o.sink, ask).catch(() => null);
    // Asking is what was wanted: with no prompt to ask through, the agent must not run with its checks off.
    if (ask && (!mcp || !this.toolApprovals)) {
      mcp?.close();
      return fail(`${h.name} cannot ask before its tool calls: the box could not serve its permission prompt (its MCP server)`);
    }
    try {
      return await this.turn(o, mcp, record, fail);
    } finally {
      mcp?.close();
    }
  }

  private async turn(
    o: RunOptions,
    mcp: BoxMcp | null,
    record: (events: MappedEvent[]) => void,
    fail: (message: string) => RunResult,
  ): Promise<RunResult> {
    const h = o.harness;
    let spec: Prepared;
    try {
      spec = await this.prepare({ ...o, mcp }, { prompt: o.prompt, resume: o.resume });
    } catch (err) {
      const e = err instanceof HutchError ? err : new HutchError("failed", (err as Error).message);
      return fail(`${e.message}${e.hint ? ` (next: ${e.hint})` : ""}`);
    }

    const mapper = h.mapper();
    let stderr = "";
    // A cut line is not a record any more: kept raw (raw() marks it truncated).
    const splitter = new LineSplitter((line, truncated) => record(truncated ? [raw(line, "unparsed")] : mapper.line(line)));
    let killTimer: ReturnType<typeof setTimeout> | undefined;
    // Headless agents get their prompt in argv; stdin is closed at once (an open one would make some wait for more).
    const { stream, done } = execIn(
      (await this.boxes.awake(o.boxId)).channel,
      { tool: "exec", argv: spec.argv, env: spec.env, cwd: spec.cwd },
      {
        onStarted: (m) =>
          record([
            emit(Events.execStarted, {
              argv: [
                h.npm ? agentCommand(h, GUEST_AGENTS_DIR) : spec.argv[0]!,
                ...(h.npm ? [`(${h.name} ${h.npm.version} headless)`] : spec.argv.slice(1)),
              ],
              pid: m.pid,
            }),
          ]),
        onData: (chan, bytes) => {
          if (chan === 1) splitter.push(bytes);
          else if (chan === 2) {
            stderr = (stderr + new TextDecoder().decode(bytes)).slice(-STDERR_TAIL);
            logger.debug(`${h.name}[stderr]: ${new TextDecoder().decode(bytes).trimEnd()}`);
          }
        },
      },
    );
    const stop = () => {
      stream.msg({ type: "signal", signal: h.stop.signal });
      // The guest kills what is left when the stream closes.
      killTimer = setTimeout(() => stream.close(), h.stop.graceMs);
    };
    if (o.signal?.aborted) stop();
    else o.signal?.addEventListener("abort", stop, { once: true });
    const end = await done;
    clearTimeout(killTimer);
    o.signal?.removeEventListener("abort", stop);
    if (!end.started) return fail(`${h.name} could not start: ${end.error?.message ?? "the box closed the stream"}`);
    splitter.end();
    const ex = end.exit ?? { code: null, signal: "lost" };
    const tail = stderr.trim().split("\n").slice(-3).join(" | ");
    const ended = mapper.end(ex);
    // A failed run says why, with the CLI's last words.
    if (tail && (ex.code !== 0 || ended.some((e) => e.kind === "agent.state" && e.data.state === "error")))
      record([{ ...raw(tail, "stderr") }]);
    record(ended);
    record([emit(Events.execExited, { code: ex.code, signal: ex.signal })]);
    return { exit: ex };
  }
}
