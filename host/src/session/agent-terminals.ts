// Connects the harness to the daemon's sessions: headless turns run through
// the AgentRunner; an agent's terminal (interactive sessions) starts with the
// argv, environment and config files its harness gives it, and once its
// process runs, its transcript is tailed into the session's log.
import type { NewEvent, SessionRow } from "../store/sessions.ts";
import type { SessionAgents } from "./service.ts";
import { harness } from "../harness/index.ts";
import type { AgentRunner } from "../harness/run.ts";

export class AgentTerminals implements SessionAgents {
  /** Transcript files of agent terminals being started, by session: tailed once the agent runs. */
  private readonly transcripts = new Map<string, { path: string; fromEnd: boolean }>();

  constructor(
    readonly runner: AgentRunner,
    readonly agentsDir: string,
    readonly install: boolean,
  ) {}

  readonly spawn = async (row: SessionRow) => {
    if (row.agent === "shell") return null;
    const spec = await this.runner.prepare(
      { boxId: row.box_id, harness: harness(row.agent), agentsDir: this.agentsDir, install: this.install },
      "interactive",
    );
    if (spec.transcript) this.transcripts.set(row.id, { path: spec.transcript, fromEnd: spec.transcriptResumed === true });
    return spec;
  };

  /** The terminal's process started: tail its transcript (if its harness keeps one) into the log. */
  started(row: SessionRow, pid: number, log: { append(sessionId: string, events: NewEvent[]): unknown }): void {
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
      actor: { kind: "agent", id: `${row.owner}/agent:${h.name}` },
      sink: { append: (events) => void log.append(row.id, events) },
    });
  }
}
