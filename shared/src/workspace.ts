// What `hutch offload --json`, `hutch bring-back --json` and `hutch port
// forward --json` print, and the offload record (`.git/hutch/<box>.json`),
// read by the VS Code extension: the CLI's output is typed against these, and
// the extension checks what it reads with them. Objects stay open
// (additional properties pass), so a field the CLI adds later does not make
// an older extension refuse the answer.
import { Type, type Static } from "@sinclair/typebox";

const Path = Type.String({ maxLength: 4096 });

/** `hutch offload [--dry-run] --json`: what goes (or went), what is held back, where it lands. */
export const OffloadOutput = Type.Object({
  root: Type.String(),
  branch: Type.String(),
  base: Type.String(),
  box: Type.String(),
  guestDir: Type.String(),
  files: Type.Array(Type.Object({ path: Path, bytes: Type.Integer({ minimum: 0 }) })),
  bytes: Type.Integer({ minimum: 0 }),
  heldBack: Type.Array(Type.Object({ path: Path, rule: Type.String() })),
  /** Git-ignored files carried on request (`--include-ignored`, `hutch.includeIgnored`), and the patterns. */
  ignored: Type.Array(Type.Object({ path: Path, bytes: Type.Integer({ minimum: 0 }) })),
  includeIgnored: Type.Array(Type.String()),
  /** What is and is not carried for submodules, LFS and secrets already in history. */
  notes: Type.Array(Type.String()),
  dryRun: Type.Boolean(),
  resumed: Type.Boolean(),
  /** A second offload: the box's copy was brought up to date in place, with only what it lacked. */
  updated: Type.Boolean(),
  /** The box's copy already was the work tree as it is: nothing was sent. */
  upToDate: Type.Boolean(),
  /** What travelled: the bundle's objects (blobs among them) and bytes; zero for a dry run. */
  sent: Type.Object({
    objects: Type.Integer({ minimum: 0 }),
    blobs: Type.Integer({ minimum: 0 }),
    bytes: Type.Integer({ minimum: 0 }),
  }),
});
export type OffloadOutput = Static<typeof OffloadOutput>;

export const BringBackCase = Type.Union([
  Type.Literal("nothing"),
  Type.Literal("fast-forward"),
  Type.Literal("merge"),
  Type.Literal("branch"),
]);
export type BringBackCase = Static<typeof BringBackCase>;

/** What `bring-back --session` appended: the box's sessions read (oldest first) and the events now in the local log. */
export const SessionLogImport = Type.Object({
  session: Type.String(),
  remote: Type.String(),
  from: Type.Array(Type.String()),
  events: Type.Integer({ minimum: 0 }),
});
export type SessionLogImport = Static<typeof SessionLogImport>;

/** `hutch bring-back BOX [--dry-run] --json`: which case, the files and commits that came home, the branch made. */
export const BringBackOutput = Type.Object({
  case: BringBackCase,
  box: Type.String(),
  root: Type.String(),
  branch: Type.String(),
  dryRun: Type.Boolean(),
  files: Type.Array(Path),
  commits: Type.Array(Type.Object({ sha: Type.String(), subject: Type.String() })),
  quarantine: Type.String(),
  reason: Type.Optional(Type.String()),
  created: Type.Optional(Type.String()),
  commands: Type.Optional(Type.Array(Type.String())),
  /** With `--session`: the box's sessions whose events were appended to that local session's log. */
  sessionLog: Type.Optional(SessionLogImport),
});
export type BringBackOutput = Static<typeof BringBackOutput>;

/** The offload journal in the user's repository, `.git/hutch/<box>.json`. */
export const OffloadRecordFile = Type.Object({
  version: Type.Literal(1),
  id: Type.String(),
  box: Type.String(),
  guestDir: Type.String(),
  branch: Type.String(),
  base: Type.String(),
  /** Set once the box's work came home by fast-forward or merge. */
  boxHead: Type.Optional(Type.String()),
  indexTree: Type.String(),
  workTree: Type.String(),
  heldBack: Type.Array(Type.String()),
  include: Type.Array(Type.String()),
  state: Type.Union([Type.Literal("sending"), Type.Literal("done")]),
  at: Type.String(),
});
export type OffloadRecordFile = Static<typeof OffloadRecordFile>;

/** One line of `hutch port forward --json` per forward added or removed. */
export const PortForwardLine = Type.Object({
  type: Type.Union([Type.Literal("forwarded"), Type.Literal("removed")]),
  local: Type.Integer({ minimum: 1, maximum: 65535 }),
  remote: Type.Integer({ minimum: 1, maximum: 65535 }),
  url: Type.String(),
});
export type PortForwardLine = Static<typeof PortForwardLine>;

/** One row of `hutch remote list --json`. */
export const RemoteListRow = Type.Object({ name: Type.String(), url: Type.String() });
export const RemoteList = Type.Array(RemoteListRow);
export type RemoteListRow = Static<typeof RemoteListRow>;
