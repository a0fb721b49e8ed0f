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

/**
 * Paths, relative to the agent's home, of every config file an adapter
 * writes before an agent starts. They hold a box's stub credentials (or
 * parts of them), so they are a box's own: never carried into a fork.
 */
export function agentConfigFiles(): string[] {
  const probe = { endpoint: () => "", stub: () => "", home: "/home/hutch", workdir: "/workspace" };
  return [...new Set(Object.values(HARNESSES).flatMap((h) => Object.keys(h.files(probe))))].sort();
}

export type { AgentContext, AgentName, Binding, Harness, MappedEvent, Mapper } from "./types.ts";
