// The one fold of a session's events into where its turn is. The daemon
// folds every event as it is stored (host/src/session/summaries.ts); a client
// that read a summary folds the events after it with the same functions, so
// the fold lives here, beside the summary it produces, for every reader.
//
// The turn keeps the seq of the latest event of each kind that moves it, so
// folding is a max per kind: an event folded twice, or a summary merged with
// events it already holds, changes nothing. Activity and "has the turn
// settled" are functions of the turn, never folded on their own. Events are
// checked against the registry before they are folded (a client folds what
// came over the wire): one whose data does not fit its kind changes nothing.
import { Events, isEvent, read, type SessionEvent } from "./events.ts";
import type { AnchoredAnnotation, SessionActivity, TurnState } from "./summary.ts";

type Folded = Pick<SessionEvent, "seq" | "kind" | "data">;

/** Kinds foldTurn reads; for every other kind it returns the turn unchanged. */
export const TURN_KINDS: readonly string[] = [
  Events.inputSent.kind,
  Events.attentionRequired.kind,
  Events.execStarted.kind,
  Events.execExited.kind,
  Events.agentState.kind,
  Events.sessionClosed.kind,
];
const TURN = new Set(TURN_KINDS);

export const emptyTurn = (): TurnState => ({ input: 0, attention: 0, started: 0, exited: 0, closed: 0 });

/** The turn after one event: the same object when the event does not move it. */
export function foldTurn(t: TurnState, e: Folded): TurnState {
  if (!TURN.has(e.kind) || !isEvent(e)) return t;
  switch (e.kind) {
    case "input.sent":
      return e.seq > t.input ? { ...t, input: e.seq } : t;
    case "attention.required":
      return e.seq > t.attention ? { ...t, attention: e.seq } : t;
    case "exec.started":
      if (e.seq <= t.started) return t;
      return e.data.warm ? { ...t, started: e.seq, warm: e.seq } : { ...t, started: e.seq };
    case "session.closed":
      return t.closed ? t : { ...t, closed: e.seq };
    case "exec.exited":
      return e.seq > t.exited ? { ...t, exited: e.seq, exit: { code: e.data.code, signal: e.data.signal } } : t;
    case "agent.state": {
      if (t.agent && t.agent.seq >= e.seq) return t;
      const { state, reason, exit } = e.data;
      return { ...t, agent: { seq: e.seq, state, ...(reason ? { reason } : {}), ...(exit ? { exit } : {}) } };
    }
    default:
      return t;
  }
}

/** The longest first line a summary keeps. */
export const FIRST_LINE_MAX = 200;

/**
 * A session's first line of input, from its first inputs in order: how the
 * sidebar names it. A terminal's input comes a keystroke at a time:
 * keystrokes are folded in (a backspace takes the last character back,
 * escape sequences such as arrow keys are dropped) until Enter ends the
 * line. An input of several characters at once (a headless prompt, a paste,
 * `session send`) ends it too. `done` says no later input can change it.
 */
export function firstLine(inputs: Iterable<string>): { text: string; done: boolean } | undefined {
  let line = "";
  let any = false;
  for (const text of inputs) {
    any = true;
    let added = 0;
    for (const c of text.replace(/\x1b(?:\[[0-?]*[ -/]*[@-~]|O.|.)/g, "")) {
      if (c === "\r" || c === "\n") {
        if (line.trim()) return { text: line.slice(0, FIRST_LINE_MAX), done: true };
      } else if (c === "\x7f" || c === "\b") line = line.slice(0, -1);
      else if (c >= " ") {
        line += c;
        added++;
      }
    }
    if ((added > 1 && line.trim()) || line.length >= FIRST_LINE_MAX) return { text: line.slice(0, FIRST_LINE_MAX), done: true };
  }
  return any ? { text: line, done: false } : undefined;
}

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
 * input, and, for a headless agent, the process that turn started exited
 * (unless it was started warm, to stay for the next prompts).
 */
export function settled(t: TurnState, headless: boolean): boolean {
  if (t.closed) return true;
  if (t.attention <= t.input || t.agent?.state === "busy") return false;
  return !headless || t.started < t.input || t.exited > t.started || t.warm === t.started;
}

/** The turn ended well: the agent is not in error and its process, if it exited (not one before it), exited 0. */
export function turnOk(t: TurnState): boolean {
  return t.agent?.state !== "error" && (t.exit === undefined || t.exited < t.started || t.exit.code === 0);
}

/** The annotation an event adds when it is anchored to a file and line, else null. */
export function anchoredAnnotation(e: Pick<SessionEvent, "seq" | "at" | "actor" | "kind" | "data">): AnchoredAnnotation | null {
  const d = read(e, Events.annotationAdded);
  if (!d?.anchor?.line) return null;
  return { seq: e.seq, at: e.at, actor: e.actor, text: d.text, anchor: d.anchor };
}
