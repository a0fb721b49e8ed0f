import type { CommandModule } from "yargs";
import { setExitCode, type GlobalArgs } from "./main.ts";

export const daemonCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: "daemon",
  describe: "run the daemon in the foreground (other verbs start it when needed)",
  handler: async (a) => {
    // Loaded here so CLI verbs don't pay for Elysia and sqlite at start-up.
    const { runDaemon } = await import("../daemon/server.ts");
    setExitCode(await runDaemon(a.home));
  },
};
