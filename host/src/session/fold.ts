// The one fold of a session's events into where its turn is. The daemon
// folds every event as it is stored (summaries.ts); a client that read a
// summary folds the events after it with the same functions.
//
// The turn keeps the seq of the latest event of each kind that moves it, so
// folding is a max per kind: an event folded twice, or a summary merged with
// events it already holds, changes nothing. Activity and "has the turn
// settled" are functions of the turn, never folded on their own.
import { Events, type AgentStateName, type AnchoredAnnotation, type SessionActivity, type SessionEvent, type TurnState } from "@hutch/shared";

type Folded = Pick<SessionEvent, "seq" | "kind" | "data">;
type Exit = { code: number | null; signal: string | null };
type Data = Record<string, unknown>;

/** The states agent.state allows, from its schema. */
const AGENT_STATES: ReadonlySet<string> = new Set<AgentStateName>(Events.agentState.data.properties.state.anyOf.map((s) => s.const));

export const emptyTurn = (): TurnState => ({ input: 0, attention: 0, started: 0, exited: 0, closed: 0 });

const obj = (v: unknown): Data | null => (v && typeof v === "object" && !Array.isArray(v) ? (v as Data) : null);

function exitOf(v: unknown): Exit | undefined {
  const d = obj(v);
  if (!d) return undefined;
  const code = typeof d.code === "number" ? d.code : null;
  const signal = typeof d.signal === "string" ? d.signal : null;
  return { code, signal };
}

/** The turn after one event: the same object when the event does not move it. */
export function foldTurn(t: TurnState, e: Folded): TurnState {
  switch (e.kind) {
    case "input.sent":
      return e.seq > t.input ? { ...t, input: e.seq } : t;
    case "attention.required":
      return e.seq > t.attention ? { ...t, attention: e.seq } : t;
    case "exec.started":
      return e.seq > t.started ? { ...t, started: e.seq } : t;
    case "session.closed":
      return t.closed ? t : { ...t, closed: e.seq };
    case "exec.exited": {
      if (e.seq <= t.exited) return t;
      const next: TurnState = { ...t, exited: e.seq };
      const exit = exitOf(e.data);
      if (exit) next.exit = exit;
      else delete next.exit;
      return next;
    }
    case "agent.state": {
      const d = obj(e.data);
      if (!d || typeof d.state !== "string" || !AGENT_STATES.has(d.state) || (t.agent && t.agent.seq >= e.seq)) return t;
      const exit = d.exit === undefined ? undefined : exitOf(d.exit);
      const agent = { seq: e.seq, state: d.state as AgentStateName, ...(typeof d.reason === "string" && d.reason ? { reason: d.reason } : {}), ...(exit ? { exit } : {}) };
      return { ...t, agent };
    }
    default:
      return t;
  }
}

/** Kinds foldTurn reads; for every other kind it returns the turn unchanged. */
export const TURN_KINDS: readonly string[] = ["input.sent", "attention.required", "exec.started", "exec.exited", "agent.state", "session.closed"];

/**
 * What the session is doing. The agent's latest state stands until attention
 * is asked (needs-input; a failed turn stays error) or someone answers with
 * input (idle again); only the latest attention and input after that state
 * matter, because each of them does the same thing every time.
 */
export function activityOf(t: TurnState): SessionActivity {
  if (t.closed) return "closed";
  let a: SessionActivity = t.agent?.state ?? "idle";
  const since = t.agent?.seq ?? 0;
  const steps: { seq: number; attention: boolean }[] = [];
  if (t.attention > since) steps.push({ seq: t.attention, attention: true });
  if (t.input > since) steps.push({ seq: t.input, attention: false });
  for (const step of steps.sort((x, y) => x.seq - y.seq)) {
    if (step.attention) a = a === "error" ? "error" : "needs-input";
    else if (a === "needs-input" || a === "error") a = "idle";
  }
  return a;
}

/**
 * Whether the latest turn has settled: attention was asked after the last
 * input, and, for a headless agent, the process that turn started exited.
 */
export function settled(t: TurnState, headless: boolean): boolean {
  if (t.closed) return true;
  if (t.attention <= t.input || t.agent?.state === "busy") return false;
  return !headless || t.started < t.input || t.exited > t.started;
}

/** The turn ended well: the agent is not in error and its process, if it exited, exited 0. */
export function turnOk(t: TurnState): boolean {
  return t.agent?.state !== "error" && (t.exit === undefined || t.exit.code === 0);
}

/** The annotation an event adds when it is anchored to a file and line, else null. */
export function anchoredAnnotation(e: Pick<SessionEvent, "seq" | "at" | "actor" | "kind" | "data">): AnchoredAnnotation | null {
  if (e.kind !== "annotation.added") return null;
  const d = obj(e.data);
  const anchor = obj(d?.anchor);
  if (typeof d?.text !== "string" || typeof anchor?.path !== "string" || !Number.isInteger(anchor.line) || (anchor.line as number) < 1) return null;
  return {
    seq: e.seq,
    at: e.at,
    actor: e.actor,
    text: d.text,
    anchor: { path: anchor.path, line: anchor.line as number, ...(Number.isInteger(anchor.seq) ? { seq: anchor.seq as number } : {}) },
  };
}
