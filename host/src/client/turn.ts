// Waiting for an agent's turn to settle, from the CLI: replay the log, then
// tail it, until the agent asks for attention (done, stuck or failed).
import { HutchError } from "@hutch/shared/base";
import { idPattern, type Session, type SessionEvent } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { subscribe } from "./subscribe.ts";
import { TurnTracker } from "./transcript.ts";

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

export async function waitTurn(d: DaemonClient, session: Session, onEvent?: (e: SessionEvent) => void | Promise<void>): Promise<TurnResult> {
  const t = new TurnTracker(session.headless === true);
  let caughtUp = false;
  const sub = subscribe(d, session.id, 1, {
    event: async (e) => {
      t.see(e);
      await onEvent?.(e);
      if (caughtUp && t.settled) sub.close();
    },
    caughtUp: () => {
      caughtUp = true;
      if (t.settled) sub.close();
    },
  });
  const stop = () => sub.close();
  process.once("SIGINT", stop);
  await sub.done;
  process.off("SIGINT", stop);
  return { session: session.id, state: t.state, reason: t.reason, exit: t.exit, closed: t.closed, ok: t.settled && t.ok };
}
