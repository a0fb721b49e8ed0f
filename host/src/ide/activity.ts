// What a session is doing, folded from its events: the sidebar's busy / idle
// / needs-input. Agent events (agent.state, message.*, tool.*) arrive with the
// agent harness; a shell session has none and reads as idle.
import type { SessionActivity } from "@hutch/shared";

const AGENT_STATES: Record<string, SessionActivity> = {
  busy: "busy",
  working: "busy",
  running: "busy",
  thinking: "busy",
  idle: "idle",
  done: "idle",
  waiting: "needs-input",
  "needs-input": "needs-input",
  blocked: "needs-input",
};

/** The activity after one event, given the one before it. */
export function nextActivity(before: SessionActivity, kind: string, data: unknown): SessionActivity {
  if (before === "closed") return before;
  switch (kind) {
    case "session.closed":
      return "closed";
    case "attention.required":
      return "needs-input";
    case "agent.state": {
      const state = (data as { state?: unknown } | null)?.state;
      return typeof state === "string" ? (AGENT_STATES[state] ?? before) : before;
    }
    case "message.started":
    case "tool.called":
      return "busy";
    case "message.completed":
    case "exec.exited":
      return "idle";
    case "input.sent":
      // Someone answered: no longer waiting on a person.
      return before === "needs-input" ? "idle" : before;
    default:
      return before;
  }
}
