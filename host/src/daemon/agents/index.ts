// HTTP for agent CLIs: what the daemon's cache holds, and installing the
// pinned versions there (an operation, daemon/ops.ts; an unknown name is
// refused before it starts). The cache is the daemon's: its boxes read it.
// No logic here.
import { Elysia, t } from "elysia";
import { AgentInfo, AgentInstallBody } from "@hutch/shared";
import { installAgents, installList, listAgents } from "../../harness/install.ts";
import { opResponse, type RunningOps } from "../ops.ts";

export function agentsController(agentsDir: string, running: RunningOps) {
  return new Elysia({ prefix: "/v1/agents", tags: ["agents"], normalize: false })
    .get("/", () => listAgents(agentsDir), {
      response: t.Array(AgentInfo),
      detail: { summary: "Agents, their pinned versions and what the daemon's cache holds" },
    })
    .post(
      "/install",
      ({ body, request }) => {
        const list = installList(body.names ?? []);
        return opResponse("agent.install", request, running, (report, signal) => installAgents(list, agentsDir, report, signal));
      },
      {
        body: AgentInstallBody,
        detail: {
          summary:
            "Install the pinned agent CLIs (all when none is named) with npm, into the daemon's cache (NDJSON: a step per agent, then what was done)",
        },
      },
    );
}
