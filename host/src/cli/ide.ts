import { HutchError } from "@hutch/shared/base";
import { body, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";

type IdeArgs = GlobalArgs & { stdio: boolean; remote?: string };

export const ide = body<IdeArgs>({
  options: {
    stdio: { type: "boolean", default: false, describe: "speak on stdin/stdout (the only transport)" },
    remote: { type: "string", describe: "a named remote (server mode)" },
  },
  run: async (a) => {
    if (!a.stdio) throw new HutchError("invalid", "hutch ide needs a transport", "run: hutch ide --stdio");
    if (a.remote)
      throw new HutchError(
        "config",
        `remote "${a.remote}": remotes come with server mode, which this hutch does not have yet`,
        "clear the hutch.remote setting to use the local daemon",
      );
    // Loaded here: the language-server library is only needed by this verb.
    const { runBridge } = await import("../ide/server.ts");
    setExitCode(await runBridge({ home: a.home }));
  },
});
