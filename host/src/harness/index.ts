// The agents hutch can run, by name.
import { HutchError } from "@hutch/shared";
import { claude } from "./claude.ts";
import { codex } from "./codex.ts";
import { opencode } from "./opencode.ts";
import { pi } from "./pi.ts";
import { shell } from "./shell.ts";
import { AGENTS, type AgentName, type Harness } from "./types.ts";

export const HARNESSES: Record<AgentName, Harness> = { claude, codex, opencode, pi, shell };

export function harness(name: string): Harness {
  if (!(AGENTS as readonly string[]).includes(name)) {
    throw new HutchError("invalid", `unknown agent "${name}"`, `pick one of: ${AGENTS.join(", ")}`);
  }
  return HARNESSES[name as AgentName];
}

export type { AgentContext, AgentName, Binding, Harness, MappedEvent, Mapper } from "./types.ts";
export { AGENTS } from "./types.ts";
