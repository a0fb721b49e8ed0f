import { body, type GlobalArgs } from "./args.ts";

export const mcp = body<GlobalArgs>({
  examples: [["claude mcp add hutch -- hutch mcp", "give Claude Code the box, exec, file and browser tools"]],
  run: async (a) => {
    // Loaded here: the SDK is only paid for by this verb.
    const { serveStdio } = await import("../mcp/server.ts");
    await serveStdio(a.home);
  },
});
