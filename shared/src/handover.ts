// The hand-over file: what `hutch offload` leaves in a box for the agent
// harness, at HANDOVER_PATH under the box user's HOME. The CLI writes it
// through the daemon API; the daemon's harness reads it back before each
// headless turn. The box can rewrite it, so it is checked against this schema
// every time it is read, and it only ever shapes the agent's argv and working
// directory inside that same box.
import { Type, type Static } from "@sinclair/typebox";

/** Relative to the box user's HOME. */
export const HANDOVER_PATH = ".hutch/handover.json";
/** Read at most this much of it: a bigger one is refused. */
export const HANDOVER_MAX_BYTES = 64 * 1024;
export const HANDOVER_NOTE_MAX = 32 * 1024;

/** A directory in the box's /workspace: absolute, no `.` or `..` component, no control characters. */
export const WorkspacePath = Type.String({
  maxLength: 4096,
  pattern: "^/workspace(/(?!\\.\\.?(/|$))[^/\\x00-\\x1f]+)+$",
  rule: "a directory under /workspace, with no . or .. part and no control characters",
});

/** An agent CLI's own conversation id (Claude Code and Codex use UUIDs). */
export const AgentSessionId = Type.String({
  pattern: "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
  rule: "a lowercase UUID",
});

/** A carried conversation: the agent resumes it, working in cwd. */
export const HandoverConversation = Type.Object({ id: AgentSessionId, cwd: WorkspacePath }, { additionalProperties: false });

export const Handover = Type.Object(
  {
    version: Type.Literal(1),
    /** The offload that wrote it (the record's id). */
    offload: Type.String({ maxLength: 64, pattern: "^off_[0-9a-z]+$", rule: "an offload id: off_ and lowercase letters or digits" }),
    /** The repository in the box: where agents work. */
    workdir: WorkspacePath,
    /** The first input of a conversation that starts fresh (an agent with nothing carried). */
    note: Type.String({ maxLength: HANDOVER_NOTE_MAX }),
    conversations: Type.Partial(
      Type.Object({ claude: HandoverConversation, codex: HandoverConversation, opencode: HandoverConversation, pi: HandoverConversation }),
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type Handover = Static<typeof Handover>;
