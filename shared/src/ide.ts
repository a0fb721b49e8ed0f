// The IDE bridge's contract: custom JSON-RPC methods and notifications that
// `hutch ide --stdio` speaks to the VS Code extension over LSP framing. Both
// sides read their params and results through these schemas.
import { Type, type Static } from "@sinclair/typebox";
import { AgentName, Box, BoxChange, BoxName, BoxRemovedChange, EngineName, Session } from "./api.ts";
import { Anchor, SessionEvent } from "./events.ts";
import { SessionActivity } from "./summary.ts";

/** Bumped when a method or notification changes incompatibly; the extension refuses an older bridge. */
export const IDE_PROTOCOL_VERSION = 1;

export const SessionView = Type.Composite([
  Session,
  Type.Object({
    activity: SessionActivity,
    /** Its first prompt or command (the summary's first line), when known. */
    first: Type.Optional(Type.String()),
  }),
]);
export type SessionView = Static<typeof SessionView>;

/** The error a failed request carries in its JSON-RPC `data`, as the daemon named it. */
export const IdeErrorData = Type.Object({ code: Type.String(), hint: Type.Optional(Type.String()) });
export type IdeErrorData = Static<typeof IdeErrorData>;

export const IdeInitializeResult = Type.Object({
  serverInfo: Type.Object({ name: Type.Literal("hutch"), version: Type.String() }),
  hutch: Type.Object({ protocolVersion: Type.Integer(), home: Type.String() }),
});

export const ListResult = Type.Object({ connected: Type.Boolean(), boxes: Type.Array(Box), sessions: Type.Array(SessionView) });
export type ListResult = Static<typeof ListResult>;

/** The change feed's lines (api.ts), a session's as the sidebar shows it. */
export const Change = Type.Union([BoxChange, BoxRemovedChange, Type.Object({ type: Type.Literal("session"), session: SessionView })]);
export type Change = Static<typeof Change>;

export const DaemonStatus = Type.Object({ connected: Type.Boolean(), reason: Type.Optional(Type.String()) });
export type DaemonStatus = Static<typeof DaemonStatus>;

export const SubscribeParams = Type.Object({ session: Type.String(), from: Type.Integer({ minimum: 1 }) });
export type SubscribeParams = Static<typeof SubscribeParams>;
export const SubscribeResult = Type.Object({ subscription: Type.String() });
export type SubscribeResult = Static<typeof SubscribeResult>;
export const UnsubscribeParams = Type.Object({ subscription: Type.String() });
export type UnsubscribeParams = Static<typeof UnsubscribeParams>;

/**
 * What an output.appended event's bytes printed, read by the bridge (the log
 * view shows what happened, not its size): the text with the terminal's
 * escape sequences stripped (not yet escaped for display), cut at
 * OUTPUT_TEXT_MAX characters; or `dropped` when the bytes were dropped under
 * the session's output cap.
 */
export const OutputText = Type.Object({
  seq: Type.Integer({ minimum: 1 }),
  text: Type.String(),
  cut: Type.Optional(Type.Boolean()),
  dropped: Type.Optional(Type.Boolean()),
});
export type OutputText = Static<typeof OutputText>;
export const OUTPUT_TEXT_MAX = 16384;

/** Events of one subscription, in seq order, batched; `caughtUp` once the replay reached the live end. */
export const EventsNotification = Type.Object({
  subscription: Type.String(),
  session: Type.String(),
  events: Type.Array(SessionEvent),
  caughtUp: Type.Optional(Type.Integer()),
  /** The text of the batch's output.appended events (not screen redraws), by seq. */
  output: Type.Optional(Type.Array(OutputText)),
});
export type EventsNotification = Static<typeof EventsNotification>;

/** A subscription that cannot go on (the session is gone, or access was refused). */
export const SubscriptionEnded = Type.Object({
  subscription: Type.String(),
  session: Type.String(),
  message: Type.String(),
  code: Type.String(),
  hint: Type.Optional(Type.String()),
});
export type SubscriptionEnded = Static<typeof SubscriptionEnded>;

export const SendParams = Type.Object({ session: Type.String(), text: Type.String({ maxLength: 65536 }) });
export type SendParams = Static<typeof SendParams>;

export const AnnotateParams = Type.Object({
  session: Type.String(),
  text: Type.String({ minLength: 1, maxLength: 65536 }),
  anchor: Type.Optional(Anchor),
});
export type AnnotateParams = Static<typeof AnnotateParams>;

export const SeqResult = Type.Object({ seq: Type.Integer() });
export type SeqResult = Static<typeof SeqResult>;

export const DriverParams = Type.Object({
  session: Type.String(),
  action: Type.Union([Type.Literal("acquire"), Type.Literal("release"), Type.Literal("steal"), Type.Literal("heartbeat")]),
  leaseMs: Type.Optional(Type.Integer({ minimum: 1 })),
});
export type DriverParams = Static<typeof DriverParams>;

/** The driver stops the agent's turn (the conversation view's Stop). */
export const InterruptParams = Type.Object({ session: Type.String() });
export type InterruptParams = Static<typeof InterruptParams>;

export const BoxParams = Type.Union([
  Type.Object({ action: Type.Literal("create"), name: BoxName, engine: Type.Optional(EngineName), start: Type.Optional(Type.Boolean()) }),
  Type.Object({
    action: Type.Union([Type.Literal("start"), Type.Literal("stop"), Type.Literal("delete")]),
    name: Type.String({ minLength: 1 }),
  }),
]);
export type BoxParams = Static<typeof BoxParams>;

export const SessionCreateParams = Type.Object({
  box: Type.Optional(Type.String({ minLength: 1 })),
  agent: Type.Optional(AgentName),
  label: Type.Optional(Type.String({ maxLength: 256 })),
  /** The agent runs headless, prompted from the editor's conversation view (no terminal). */
  headless: Type.Optional(Type.Boolean()),
});
export type SessionCreateParams = Static<typeof SessionCreateParams>;

/** Method and notification names, one place. */
export const IdeMethods = {
  list: "hutch/list",
  subscribe: "hutch/subscribe",
  unsubscribe: "hutch/unsubscribe",
  send: "hutch/send",
  annotate: "hutch/annotate",
  driver: "hutch/driver",
  interrupt: "hutch/interrupt",
  box: "hutch/box",
  sessionCreate: "hutch/session/create",
} as const;

export const IdeNotifications = {
  changed: "hutch/changed",
  daemon: "hutch/daemon",
  events: "hutch/events",
  subscriptionEnded: "hutch/subscriptionEnded",
} as const;

/** Where a box's workspace is inside the box: anchors name files there, or relative to it. */
export const BOX_WORKSPACE = "/workspace";

/** A POSIX path with `.` and `..` resolved (no file system); a relative one may keep leading `..`. */
function normalizePosix(p: string): string {
  const absolute = p.startsWith("/");
  const out: string[] = [];
  for (const part of p.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === ".." && out.length > 0 && out.at(-1) !== "..") out.pop();
    else if (part !== ".." || !absolute) out.push(part);
  }
  return (absolute ? "/" : "") + out.join("/");
}

/**
 * Where in the IDE's workspace folder (`root`, the box's /workspace as the
 * editor sees it) an anchor's path points: the path relative to that folder
 * ("" for the folder itself), or null when it points anywhere else. Anchors
 * come from whoever annotated the session, so a link never leaves the
 * workspace: not through `..`, not to another absolute path.
 */
export function anchorInWorkspace(root: string | null, path: string): string | null {
  if (!root) return null;
  const p = normalizePosix(path);
  if (p === ".." || p.startsWith("../")) return null;
  if (!p.startsWith("/")) return p;
  for (const base of [BOX_WORKSPACE, normalizePosix(root)]) {
    if (p === base) return "";
    if (p.startsWith(`${base}/`)) return p.slice(base.length + 1);
  }
  return null;
}
