// The sidebar's dispatches (host/src/dispatch): each orchestration session
// (agent "dispatch", labelled "dispatch <id>") is a group, and its workers'
// sessions (labelled "dispatch <id> worker <n>") sit under it instead of
// under their boxes, which a dispatch deletes. Read from the session rows
// alone, so the tree needs no call of its own.
import type { SessionView } from "@hutch/shared";

type Labelled = Pick<SessionView, "agent" | "label">;

const ORCHESTRATION = /^dispatch (dsp_[0-9a-z]{20})$/;
const WORKER = /^dispatch (dsp_[0-9a-z]{20}) worker (\d+)$/;

/** The dispatch an orchestration session holds, or null for any other session. */
export function dispatchOf(s: Labelled): string | null {
  return s.agent === "dispatch" ? (ORCHESTRATION.exec(s.label ?? "")?.[1] ?? null) : null;
}

/** Which dispatch a worker's session belongs to, and its number; null for any other session. */
export function workerOf(s: Labelled): { dispatch: string; n: number } | null {
  const m = WORKER.exec(s.label ?? "");
  return m ? { dispatch: m[1]!, n: Number(m[2]) } : null;
}

/** The workers of one dispatch among the sessions listed, by number. */
export function workersOf<S extends Labelled>(dispatch: string, sessions: S[]): S[] {
  return sessions.filter((s) => workerOf(s)?.dispatch === dispatch).sort((a, b) => (workerOf(a)?.n ?? 0) - (workerOf(b)?.n ?? 0));
}

/** The group's description: how many workers, and how many of them are still at work. */
export function dispatchDescription(orchestration: SessionView, workers: SessionView[]): string {
  const busy = workers.filter((w) => w.activity === "busy").length;
  const state = orchestration.state === "closed" ? "finished" : busy ? `${busy} at work` : "grading";
  return `dispatch · ${workers.length} worker${workers.length === 1 ? "" : "s"} · ${state}`;
}
