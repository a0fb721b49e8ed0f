// What `hutch offload` left in a box for its agents (shared/src/handover.ts):
// the repository to work in, the conversation each agent resumes, and the
// hand-over note a fresh conversation starts with. Read from the box before
// every turn, so it is untrusted: bounded, checked against its schema, and
// only ever turned into the agent's argv and working directory in that box.
import { check, firstError, HANDOVER_MAX_BYTES, HANDOVER_PATH, Handover, HutchError } from "@hutch/shared";
import type { AgentName, Resume } from "./types.ts";

/** The file's text as the box printed it ("" when there is none), parsed and checked; throws a named error when it is not one. */
export function parseHandover(text: string, box: string): Handover | null {
  if (text.trim() === "") return null;
  const fix = `offload again, or remove it: hutch exec ${box} -- sh -c 'rm ~/${HANDOVER_PATH}'`;
  if (text.length > HANDOVER_MAX_BYTES)
    throw new HutchError("invalid", `the box's hand-over file ~/${HANDOVER_PATH} is over ${HANDOVER_MAX_BYTES} bytes`, fix);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HutchError("invalid", `the box's hand-over file ~/${HANDOVER_PATH} is not JSON`, fix);
  }
  if (!check(Handover, value))
    throw new HutchError("invalid", `the box's hand-over file ~/${HANDOVER_PATH} is not valid: ${firstError(Handover, value)}`, fix);
  return value;
}

export interface Turn {
  workdir: string;
  prompt: string;
  resume: Resume;
}

/**
 * One turn shaped by the hand-over: the agent works in the repository (or the
 * directory its carried conversation was in); a turn that would start a new
 * conversation resumes the carried one instead, or, with none carried, starts
 * with the hand-over note before the prompt. A follow-up (resume true)
 * continues the last conversation in that directory, as without a hand-over.
 */
export function shapeTurn(h: Handover | null, agent: AgentName, turn: Turn): Turn {
  if (!h) return turn;
  const carried = agent === "shell" ? undefined : h.conversations[agent];
  const workdir = carried?.cwd ?? h.workdir;
  if (turn.resume !== false) return { ...turn, workdir };
  if (carried) return { workdir, prompt: turn.prompt, resume: carried.id };
  return { workdir, prompt: h.note ? `${h.note}\n\n${turn.prompt}` : turn.prompt, resume: false };
}
