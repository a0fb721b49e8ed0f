// Waiting for an agent's turn to settle, from the CLI: start from the
// daemon's summary of the session (or from seq 1 for a caller that shows
// every event), then tail the log, folding it the way the daemon does, until
// the agent asks for attention (done, stuck or failed).
import { HutchError } from "@hutch/shared/base";
import {
  emptyTurn,
  foldTurn,
  idPattern,
  settled,
  turnOk,
  type Session,
  type SessionEvent,
  type SessionSummary,
  type TurnState,
} from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { subscribe } from "./subscribe.ts";

export interface TurnResult {
  session: string;
  state: string | null;
  reason: string | null;
  exit: { code: number | null; signal: string | null } | null;
  closed: boolean;
  ok: boolean;
}

const SESSION_ID = new RegExp(idPattern("ses"));

/** A session id, or the newest open session of a box. */
export async function resolveSession(d: DaemonClient, ref: string): Promise<Session> {
  if (SESSION_ID.test(ref)) return d.request<Session>("GET", `/v1/sessions/${ref}`);
  const list = await d.request<Session[]>("GET", `/v1/sessions?box=${encodeURIComponent(ref)}&state=open`);
  const s = list.sort((a, b) => a.createdAt.localeCompare(b.createdAt)).at(-1);
  if (!s) throw new HutchError("not_found", `box "${ref}" has no open session`, `start one: hutch run ${ref} --agent claude`);
  return s;
}

export async function waitTurn(
  d: DaemonClient,
  session: Session,
  onEvent?: (e: SessionEvent) => void | Promise<void>,
): Promise<TurnResult> {
  const headless = session.headless === true;
  let turn: TurnState = emptyTurn();
  let from = 1;
  if (!onEvent) {
    const s = await d.request<SessionSummary>("GET", `/v1/sessions/${encodeURIComponent(session.id)}/summary`);
    turn = s.turn;
    from = s.session.lastSeq + 1;
  }
  const result = (): TurnResult => ({
    session: session.id,
    state: turn.agent?.state ?? null,
    reason: turn.agent?.reason ?? null,
    exit: turn.exit ?? null,
    closed: turn.closed > 0,
    ok: settled(turn, headless) && turnOk(turn),
  });
  if (!onEvent && settled(turn, headless)) return result();
  let caughtUp = false;
  const sub = subscribe(d, session.id, from, {
    event: async (e) => {
      turn = foldTurn(turn, e);
      await onEvent?.(e);
      if (caughtUp && settled(turn, headless)) sub.close();
    },
    caughtUp: () => {
      caughtUp = true;
      if (settled(turn, headless)) sub.close();
    },
  });
  const stop = () => sub.close();
  process.once("SIGINT", stop);
  await sub.done;
  process.off("SIGINT", stop);
  return result();
}
