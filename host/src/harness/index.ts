// The agents hutch can run, by name.
import { AGENT_NAMES, HutchError } from "@hutch/shared";
import { claude } from "./claude.ts";
import { codex } from "./codex.ts";
import { opencode } from "./opencode.ts";
import { pi } from "./pi.ts";
import { shell } from "./shell.ts";
import type { AgentName, Harness } from "./types.ts";

export const HARNESSES: Record<AgentName, Harness> = { claude, codex, opencode, pi, shell };

export function harness(name: string): Harness {
  if (!(AGENT_NAMES as readonly string[]).includes(name)) {
    throw new HutchError("invalid", `unknown agent "${name}"`, `pick one of: ${AGENT_NAMES.join(", ")}`);
  }
  return HARNESSES[name as AgentName];
}

export type { AgentContext, AgentName, Binding, Harness, MappedEvent, Mapper } from "./types.ts";
