// What a session is doing, folded from its events: the sidebar's busy / idle
// / needs-input / error. Agent events (agent.state, message.*, tool.*) arrive
// with the agent harness; a shell session has none and reads as idle. Events
// come from the daemon: one whose data does not fit its kind changes nothing.
import { isEvent, type EventData, type SessionActivity } from "@hutch/shared";

/** Every state agent.state may carry, as the sidebar shows it. */
const AGENT_STATES: Record<EventData<"agent.state">["state"], SessionActivity> = {
  busy: "busy",
  idle: "idle",
  "needs-input": "needs-input",
  error: "error",
};

/** The activity after one event, given the one before it. */
export function nextActivity(before: SessionActivity, e: { kind: string; data: unknown }): SessionActivity {
  if (before === "closed" || !isEvent(e)) return before;
  switch (e.kind) {
    case "session.closed":
      return "closed";
    case "attention.required":
      // A failed turn asks for attention too; it stays shown as failed.
      return before === "error" ? before : "needs-input";
    case "agent.state":
      return AGENT_STATES[e.data.state];
    case "message.started":
    case "tool.called":
      return "busy";
    case "message.completed":
    case "exec.exited":
      return "idle";
    case "input.sent":
      // Someone answered: no longer waiting on a person.
      return before === "needs-input" || before === "error" ? "idle" : before;
    default:
      return before;
  }
}
