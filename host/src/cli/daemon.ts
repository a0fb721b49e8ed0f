import { body, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";

type DaemonArgs = GlobalArgs & { "image-build"?: string };

// The one verb that loads the daemon's code (Elysia, sqlite, the engines), in-process.
export const daemon = body<DaemonArgs>({
  options: {
    // The daemon's own worker for one image build (host/src/image/worker.ts); not for people.
    "image-build": { type: "string", hidden: true },
  },
  run: async (a) => {
    if (a["image-build"] !== undefined) {
      const { runBuildWorker } = await import("../image/worker.ts");
      return setExitCode(await runBuildWorker(a.home, a["image-build"]));
    }
    const { runDaemon } = await import("../daemon/server.ts");
    setExitCode(await runDaemon(a.home));
  },
});
