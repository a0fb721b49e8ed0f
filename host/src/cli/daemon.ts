import type { CommandModule } from "yargs";
import { setExitCode, type GlobalArgs } from "./main.ts";

type DaemonArgs = GlobalArgs & { "image-build"?: string };

export const daemonCommand: CommandModule<GlobalArgs, DaemonArgs> = {
  command: "daemon",
  describe: "run the daemon in the foreground (other verbs start it when needed)",
  // The daemon's own worker for one image build (host/src/image/worker.ts); not for people.
  builder: (y) => y.option("image-build", { type: "string", hidden: true }),
  handler: async (a) => {
    if (a["image-build"] !== undefined) {
      const { runBuildWorker } = await import("../image/worker.ts");
      return setExitCode(await runBuildWorker(a.home, a["image-build"]));
    }
    // Loaded here so CLI verbs don't pay for Elysia and sqlite at start-up.
    const { runDaemon } = await import("../daemon/server.ts");
    setExitCode(await runDaemon(a.home));
  },
};
