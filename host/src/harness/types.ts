// The one adapter interface every coding agent implements: how its CLI is
// installed, configured for the broker, started (headless or in a terminal),
// read (its structured stream, mapped to session events) and stopped.
import type { AgentName, TypedEvent } from "@hutch/shared";

/** Credentialed endpoints the broker serves (`http://127.0.0.1:3128/<binding>` inside a box). */
export type Binding = "anthropic" | "openai" | "github";

export type { AgentName } from "@hutch/shared";

/** What an adapter needs to build an agent's environment: one call per box. */
export interface AgentContext {
  /**
   * Base URL of a credentialed binding; `<broker>/<binding>` in a box, the fake model API when recording on the host.
   * (The proxy settings for CONNECT are not the adapter's: every process in a box gets them from the broker's listener.)
   */
  endpoint(binding: Binding): string;
  /** The per-box stub credential for a binding: never the real secret (the broker swaps it). */
  stub(binding: Binding): string;
  /** The agent's HOME (config and state files go under it). */
  home: string;
  /** Where it works. */
  workdir: string;
  model?: string;
  /**
   * The box's MCP server (the browser and desktop tools, served by hutch-guest
   * on the box's loopback for this run; ./mcp-link.ts): absent when the box
   * could not serve one. Adapters whose CLI speaks MCP over HTTP point it here.
   */
  mcp?: { name: string; url: string; token: string };
  /**
   * "ask": the agent keeps its own permission check and asks through the MCP
   * server's permission prompt tool (a person answers in hutch approvals);
   * absent: it runs with its prompts off (the box is the sandbox).
   */
  permissions?: "ask";
}

/** A session event as a harness maps it (data typed by its kind); the daemon stamps seq, time and actor. */
export type MappedEvent = TypedEvent;

/**
 * Turns one agent's output stream into events. Stateful per run (it remembers
 * which message a delta belongs to); fed line by line; never throws on bad
 * input: what it does not understand comes back as `agent.raw`.
 */
export interface Mapper {
  line(text: string): MappedEvent[];
  /** The process ended: whatever the stream left unsaid (a turn that never finished is an error). */
  end(exit: { code: number | null; signal: string | null }): MappedEvent[];
}

/** Start fresh (false), continue the last conversation (true), or resume the agent's conversation of this id. */
export type Resume = boolean | string;

export interface NpmPackage {
  name: string;
  /** Pinned: fixtures are recorded against this version and a test fails when the installed one differs. */
  version: string;
  /** The executable under node_modules/.bin. */
  bin: string;
  /**
   * A runtime the CLI needs that a box's own may lack, installed beside it
   * from npm, pinned, and run explicitly (pi needs Node 20.6 or later; Debian
   * 12, which VM images are made from, has 18): `bin` is its executable
   * inside its package.
   */
  runtime?: { name: string; version: string; bin: string };
}

export interface Harness {
  name: AgentName;
  /** null for `shell`, which needs nothing installed. */
  npm: NpmPackage | null;
  bindings: Binding[];
  /** Hosts the agent must reach directly through the broker's CONNECT allowlist (beyond its bindings). */
  egress: string[];
  /** Environment for the agent, pointing it at the broker with stub credentials. */
  env(ctx: AgentContext): Record<string, string>;
  /** Config files to write before it starts, by path relative to ctx.home. */
  files(ctx: AgentContext): Record<string, string>;
  /**
   * argv after the binary for a headless turn (structured stream on stdout); `resume` true continues the
   * box's last conversation in the workdir, a string resumes the agent's own conversation of that id (one
   * `hutch offload` carried in).
   */
  headless(prompt: string, ctx: AgentContext, resume: Resume): string[];
  /**
   * Its headless agent can stay running between a session's prompts (./warm.ts): started once with
   * `args` (a structured stream on stdout, prompts on stdin), each prompt written as `message`, the
   * turn ended early by writing `interrupt`; `ready` asks it to answer once it can take a prompt
   * (started before the first one); `control` says a stdout line answers such a request (the
   * protocol's, not the agent's doing: not logged) and, for a request, which.
   */
  warm?: {
    args(ctx: AgentContext, resume: Resume): string[];
    message(prompt: string): string;
    interrupt(requestId: string): string;
    ready(requestId: string): string;
    /** Null: not a control line; else the request it answers ("" when it names none). */
    control(line: string): string | null;
  };
  /** argv after the binary for the interactive TUI (run in a box terminal). */
  interactive(ctx: AgentContext): string[];
  /** A new mapper for one run of the headless stream. */
  mapper(): Mapper;
  /**
   * For the interactive TUI: the transcript file it keeps, tailed for
   * structure while the user types in the terminal (absent: the terminal's
   * bytes are all the log gets).
   */
  transcript?: {
    /** Extra argv naming the agent's session, so the file's path is known before it starts; `resume`: an existing one (carried by an offload). */
    args(agentSession: string, resume?: boolean): string[];
    path(ctx: AgentContext, agentSession: string): string;
    mapper(): Mapper;
  };
  /** Signal that asks it to stop cleanly; forced with SIGKILL after graceMs. */
  stop: { signal: "INT" | "TERM"; graceMs: number };
  /** Its headless turn can ask a person before a tool call (ctx.permissions "ask", through the box's MCP server). */
  asksPermission?: boolean;
}
