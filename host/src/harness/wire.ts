// Connects the harness to the daemon's sessions: headless turns run through
// the AgentRunner; an agent's terminal (interactive sessions) starts with the
// argv, environment and config files its harness gives it.
import type { BoxService } from "../box/service.ts";
import type { Recorder } from "../session/recorder.ts";
import type { SessionService } from "../session/service.ts";
import { env } from "../env.ts";
import type { BrokerLink } from "./broker-link.ts";
import { harness } from "./index.ts";
import { AgentRunner } from "./run.ts";

export function wireAgents(deps: { sessions: SessionService; recorder: Recorder; boxes: BoxService; home: string; link: BrokerLink }): AgentRunner {
  const runner = new AgentRunner(deps.boxes, deps.link);
  const agentsDir = env.agentsDir(deps.home);
  const install = env.agentInstall();
  deps.sessions.attachAgents({ runner, agentsDir, install });
  /** Transcript files of agent terminals being started, by session: tailed once the agent runs. */
  const transcripts = new Map<string, string>();
  deps.recorder.spawn = async (row) => {
    if (row.agent === "shell") return null;
    const spec = await runner.prepare({ boxId: row.box_id, harness: harness(row.agent), agentsDir, install }, "interactive");
    if (spec.transcript) transcripts.set(row.id, spec.transcript);
    return spec;
  };
  deps.recorder.onStarted = (row, pid) => {
    const path = transcripts.get(row.id);
    transcripts.delete(row.id);
    if (!path) return;
    const h = harness(row.agent);
    runner.tail({ boxId: row.box_id, harness: h, path, pid, actor: { kind: "agent", id: `${row.owner}/agent:${h.name}` }, sink: { append: (events) => void deps.sessions.append(row.id, events) } });
  };
  return runner;
}
