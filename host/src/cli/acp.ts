import { join } from "node:path";
import { body, type GlobalArgs } from "./args.ts";

type AcpArgs = GlobalArgs & { agent?: string };

export const acp = body<AcpArgs>({
  options: {
    agent: {
      type: "string",
      choices: ["claude", "codex", "opencode", "pi"],
      describe: "the agent a new session runs",
      defaultDescription: "acp.agent in config.json, else claude",
    },
  },
  examples: [["hutch acp --agent codex", "what an editor runs (Zed: agent_servers in settings.json)"]],
  run: async (a) => {
    // Loaded here: the SDK is only paid for by this verb.
    const [{ serveStdio }, { connectDaemon }, { loadConfig }, { HOME_FILES }] = await Promise.all([
      import("../acp/agent.ts"),
      import("../client/daemon.ts"),
      import("../config.ts"),
      import("../paths.ts"),
    ]);
    const agent = (a.agent ?? loadConfig(join(a.home, HOME_FILES.config)).acp?.agent ?? "claude") as "claude" | "codex" | "opencode" | "pi";
    await serveStdio({ agent, connect: (name) => connectDaemon(a.home, { kind: "ide", name }) });
  },
});
