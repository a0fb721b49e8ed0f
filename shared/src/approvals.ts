// Approvals: what crosses a box's boundary and waits for a person (a
// credentialed write, a host the policy does not list). The shapes the API
// and the CLI share; the events that log them are in events.ts. The
// implementation and its rules: host/src/approval/README.md.
import { Type, type Static } from "@sinclair/typebox";
import { Actor } from "./actor.ts";
import { idPattern } from "./ids.ts";

export const ApprovalId = Type.String({
  pattern: idPattern("apr"),
  title: "approval",
  rule: "an approval id: apr_ and 20 lowercase letters or digits",
});

/**
 * What is asked about: a request sent with the user's credential, a
 * connection to a host the box's policy does not list, or a tool call the
 * agent's own permission check holds (`hutch run --permissions ask`).
 */
export const ApprovalKind = Type.Union([Type.Literal("credential"), Type.Literal("egress"), Type.Literal("tool")]);
export type ApprovalKind = Static<typeof ApprovalKind>;

/** A person's answer (the Agent Client Protocol's permission options). */
export const ApprovalChoice = Type.Union([
  Type.Literal("allow_once"),
  Type.Literal("allow_always"),
  Type.Literal("reject_once"),
  Type.Literal("reject_always"),
]);
export type ApprovalChoice = Static<typeof ApprovalChoice>;

/** How an approval ended: a person's answer, or nobody's before it expired. */
export const ApprovalOutcome = Type.Union([...ApprovalChoice.anyOf, Type.Literal("expired")]);
export type ApprovalOutcome = Static<typeof ApprovalOutcome>;

/** The sha256 (hex) of exactly what would be done; a decision holds for that and nothing else. */
export const ApprovalDigest = Type.String({ pattern: "^sha256:[0-9a-f]{64}$", rule: "sha256: and 64 lowercase hex digits" });

export const APPROVAL_SUMMARY_MAX = 1024;
export const APPROVAL_REASON_MAX = 1024;

/** One approval as `hutch approvals` lists it. */
export const Approval = Type.Object({
  id: ApprovalId,
  kind: ApprovalKind,
  box: Type.String(),
  boxName: Type.String(),
  session: Type.String(),
  summary: Type.String({ maxLength: APPROVAL_SUMMARY_MAX }),
  digest: ApprovalDigest,
  target: Type.Optional(Type.String({ maxLength: 300 })),
  requestedAt: Type.String(),
  expiresAt: Type.String(),
  /** pending until decided or expired. */
  state: Type.Union([Type.Literal("pending"), ApprovalOutcome]),
  decidedBy: Type.Optional(Actor),
  reason: Type.Optional(Type.String({ maxLength: APPROVAL_REASON_MAX })),
});
export type Approval = Static<typeof Approval>;

/** POST /v1/approvals/:id */
export const ApprovalDecideBody = Type.Object(
  {
    decision: ApprovalChoice,
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: APPROVAL_REASON_MAX })),
  },
  { additionalProperties: false },
);
export type ApprovalDecideBody = Static<typeof ApprovalDecideBody>;

/** GET /v1/approvals: pending ones by default. */
export const ApprovalListQuery = Type.Object(
  {
    box: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    session: Type.Optional(Type.String({ pattern: idPattern("ses"), rule: "a session id: ses_ and 20 lowercase letters or digits" })),
  },
  { additionalProperties: false },
);
export type ApprovalListQuery = Static<typeof ApprovalListQuery>;

/** One line of `hutch approvals --watch --json`: an approval newly pending, or one that left the list (decided or expired). */
export const ApprovalWatchLine = Type.Union([
  Type.Object({ type: Type.Literal("pending"), approval: Approval }),
  Type.Object({ type: Type.Literal("done"), id: ApprovalId, approval: Type.Optional(Approval) }),
]);
export type ApprovalWatchLine = Static<typeof ApprovalWatchLine>;
