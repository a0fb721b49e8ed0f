// Connects the harness to the daemon's sessions: headless turns run through
// the AgentRunner; an agent's terminal (interactive sessions) starts with the
// argv, environment and config files its harness gives it, and once its
// process runs, its transcript is tailed into the session's log.
import type { NewEvent, SessionRow } from "../store/types.ts";
import type { SessionAgents } from "./service.ts";
import { harness } from "../harness/index.ts";
import type { AgentRunner } from "../harness/run.ts";
import type { BoxMcp } from "../harness/mcp-link.ts";

/** An agent terminal's MCP server, opened before its process starts: its calls wait here until the log is known. */
interface PendingMcp {
  mcp: BoxMcp | null;
  log?: (events: NewEvent[]) => void;
  held: NewEvent[];
}

export class AgentTerminals implements SessionAgents {
  /** Transcript files of agent terminals being started, by session: tailed once the agent runs. */
  private readonly transcripts = new Map<string, { path: string; fromEnd: boolean }>();
  private readonly mcps = new Map<string, PendingMcp>();

  constructor(
    readonly runner: AgentRunner,
    readonly agentsDir: string,
    readonly install: boolean,
  ) {}

  readonly spawn = async (row: SessionRow) => {
    if (row.agent === "shell") return null;
    const h = harness(row.agent);
    const pending: PendingMcp = { mcp: null, held: [] };
    const sink = { append: (events: NewEvent[]) => (pending.log ? pending.log(events) : pending.held.push(...events.slice(0, 1000))) };
    pending.mcp = await this.runner.openMcp(row.box_id, h, agentActor(row), sink).catch(() => null);
    let spec: Awaited<ReturnType<AgentRunner["prepare"]>>;
    try {
      spec = await this.runner.prepare(
        { boxId: row.box_id, harness: h, agentsDir: this.agentsDir, install: this.install, mcp: pending.mcp },
        "interactive",
      );
    } catch (err) {
      pending.mcp?.close();
      throw err;
    }
    this.mcps.get(row.id)?.mcp?.close();
    this.mcps.set(row.id, pending);
    if (spec.transcript) this.transcripts.set(row.id, { path: spec.transcript, fromEnd: spec.transcriptResumed === true });
    return spec;
  };

  /** The terminal's process started: tail its transcript (if its harness keeps one) into the log. */
  started(row: SessionRow, pid: number, log: { log(sessionId: string, events: NewEvent[]): void }): void {
    const pending = this.mcps.get(row.id);
    this.mcps.delete(row.id);
    if (pending) {
      pending.log = (events) => log.log(row.id, events);
      if (pending.held.length > 0) pending.log(pending.held.splice(0));
      // The agent's MCP server lives as long as its process.
      if (pending.mcp) this.runner.whileRuns(row.box_id, pid, pending.mcp.close);
    }
    const t = this.transcripts.get(row.id);
    this.transcripts.delete(row.id);
    if (!t) return;
    const h = harness(row.agent);
    this.runner.tail({
      boxId: row.box_id,
      harness: h,
      path: t.path,
      fromEnd: t.fromEnd,
      pid,
      actor: agentActor(row),
      sink: { append: (events) => log.log(row.id, events) },
    });
  }
}

/** Who an agent terminal's own events are attributed to. */
function agentActor(row: SessionRow) {
  return { kind: "agent" as const, id: `${row.owner}/agent:${row.agent}` };
}
