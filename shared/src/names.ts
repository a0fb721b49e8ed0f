// The closed sets of names every side offers and checks, with no schema
// library behind them, so the CLI's fast entry (`@hutch/shared/base`) can
// list them as choices; api.ts builds the schemas from these same lists.

/** The engines a box can run on (host/src/engine). */
export const ENGINE_NAMES = ["process", "qemu"] as const;
export type EngineName = (typeof ENGINE_NAMES)[number];

/** The coding agents hutch can run (host/src/harness); `shell` is a plain login shell. */
export const AGENT_NAMES = ["claude", "codex", "opencode", "pi", "shell"] as const;
export type AgentName = (typeof AGENT_NAMES)[number];

/** The broker bindings each agent reaches its model API through (host/src/harness reads them from here). */
export const AGENT_BINDINGS: Readonly<Record<AgentName, readonly ("anthropic" | "openai")[]>> = {
  claude: ["anthropic"],
  codex: ["openai"],
  opencode: ["anthropic"],
  pi: ["openai"],
  shell: [],
};
