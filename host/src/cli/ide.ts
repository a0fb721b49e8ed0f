import { HutchError } from "@hutch/shared/base";
import { body, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";

type IdeArgs = GlobalArgs & { stdio: boolean };

// The remote, when the extension names one (its hutch.remote setting), comes as the global --remote.
export const ide = body<IdeArgs>({
  options: {
    stdio: { type: "boolean", default: false, describe: "speak on stdin/stdout (the only transport)" },
  },
  run: async (a) => {
    if (!a.stdio) throw new HutchError("invalid", "hutch ide needs a transport", "run: hutch ide --stdio");
    // Loaded here: the language-server library is only needed by this verb.
    const { runBridge } = await import("../ide/server.ts");
    setExitCode(await runBridge({ home: a.home }));
  },
});
