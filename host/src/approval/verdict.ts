// What an approval's source acts on: the answer a person (or the expiry)
// gave, and the verdict it makes (go ahead, or refuse with a status and a
// message). Apart from the service, so a source (the broker's gate) names
// these types without importing what the service imports.
import { HutchError, type Actor, type ApprovalOutcome } from "@hutch/shared";

export interface ApprovalAnswer {
  id: string;
  decision: ApprovalOutcome;
  /** Who decided (the daemon for an expiry). */
  by: Actor;
  reason?: string;
}

/** An approval's outcome as its source acts on it: go ahead, or refuse with this status and message. */
export type Verdict = { allow: true; id: string } | { allow: false; status: number; message: string };

export function verdictOf(a: ApprovalAnswer): Verdict {
  if (a.decision === "allow_once" || a.decision === "allow_always") return { allow: true, id: a.id };
  if (a.decision === "expired")
    return {
      allow: false,
      status: 403,
      message: `approval ${a.id} expired: nobody answered in time; ask the user to watch hutch approvals, then retry`,
    };
  return { allow: false, status: 403, message: `denied by ${a.by.id}${a.reason ? `: ${a.reason}` : ""} (approval ${a.id})` };
}

export const hintOf = (err: unknown) => (err instanceof HutchError && err.hint ? `; ${err.hint}` : "");
