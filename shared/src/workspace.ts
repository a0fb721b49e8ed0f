// What `hutch offload --json`, `hutch bring-back --json` and `hutch port
// forward --json` print, and the offload record (`.git/hutch/<box>.json`),
// read by the VS Code extension: the CLI's output is typed against these, and
// the extension checks what it reads with them. Objects stay open
// (additional properties pass), so a field the CLI adds later does not make
// an older extension refuse the answer.
import { Type, type Static } from "@sinclair/typebox";

const Path = Type.String({ maxLength: 4096 });

/** An agent conversation an offload carried into the box (`claude --resume ID` and the like continue it there). */
export const CarriedConversation = Type.Object({
  agent: Type.Union([Type.Literal("claude"), Type.Literal("codex"), Type.Literal("pi")]),
  id: Type.String(),
  /** Its local file, and where it ran here. */
  local: Path,
  localCwd: Path,
  /** Where it runs in the box. */
  cwd: Path,
  bytes: Type.Integer({ minimum: 0 }),
  /** Of the copy the box got: the same bytes coming back mean the box added nothing. */
  sha256: Type.String(),
  /** Secrets replaced by a marker before it left. */
  redacted: Type.Integer({ minimum: 0 }),
});
export type CarriedConversation = Static<typeof CarriedConversation>;

/** A box agent's conversation a bring-back wrote beside the local CLI's. */
export const BroughtConversation = Type.Object({
  agent: CarriedConversation.properties.agent,
  /** Its id in the box, and the id it has here (fresh when the box's was taken). */
  boxId: Type.String(),
  id: Type.String(),
  path: Path,
  cwd: Path,
  sha256: Type.String(),
  /** The command that continues it here. */
  resume: Type.String(),
});
export type BroughtConversation = Static<typeof BroughtConversation>;

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
  /** The agents' conversations carried (the box's agent resumes them); without one it starts with the hand-over note. */
  conversations: Type.Optional(Type.Array(CarriedConversation)),
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
  /** The box agent's conversations written beside the local CLI's, each with the command that continues it. */
  conversations: Type.Array(BroughtConversation),
  /** What to know about the conversations: one left in the box and why, secrets replaced on the way home. */
  notes: Type.Array(Type.String()),
});
export type BringBackOutput = Static<typeof BringBackOutput>;

/** What a box's copy was after an offload (or after its work last came home): what an update starts from. */
export const OffloadBaseline = Type.Object({
  id: Type.String(),
  base: Type.String(),
  boxHead: Type.Optional(Type.String()),
  indexTree: Type.String(),
  workTree: Type.String(),
  /** The offload's work commit then: the box holds it, so an update leaves its objects out. */
  work: Type.String(),
  /** The git-ignored files carried then: their tree, and the commit of it the box holds. */
  ignoredTree: Type.Optional(Type.String()),
  ignored: Type.Optional(Type.String()),
});
export type OffloadBaseline = Static<typeof OffloadBaseline>;

/** The offload journal in the user's repository, `.git/hutch/<box>.json`. */
export const OffloadRecordFile = Type.Object({
  version: Type.Literal(1),
  /** This attempt's id; the box's copy carries it (.git/hutch-offload-id) once complete. */
  id: Type.String(),
  box: Type.String(),
  /** The repository in the box. */
  guestDir: Type.String(),
  branch: Type.String(),
  /** The local commit the work was offloaded from, or the box's HEAD after a fast-forward brought it home. */
  base: Type.String(),
  /** The box's HEAD when its work last came home (bring-back exports what follows it); the base until then. */
  boxHead: Type.Optional(Type.String()),
  /** The baseline trees: what was offloaded, then what the box had when its work last came home. */
  indexTree: Type.String(),
  workTree: Type.String(),
  heldBack: Type.Array(Type.String()),
  /** The --include paths, so bring-back sees the work tree the same way. */
  include: Type.Array(Type.String()),
  /** The --include-ignored patterns (with the repository's hutch.includeIgnored), and the tree of the files they carried. */
  includeIgnored: Type.Optional(Type.Array(Type.String())),
  ignoredTree: Type.Optional(Type.String()),
  state: Type.Union([Type.Literal("sending"), Type.Literal("done")]),
  at: Type.String(),
  /** Set while a second offload updates the box's copy: the copy it started from (a rerun checks the box against it). */
  from: Type.Optional(OffloadBaseline),
  /** The agents' conversations carried into the box, and those brought home from it. */
  conversations: Type.Optional(Type.Array(CarriedConversation)),
  conversationsHome: Type.Optional(Type.Array(BroughtConversation)),
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

/**
 * One row of `hutch remote list --json`: `url` is the server the client tries
 * first (the one that answered last), `servers` every server of the remote in
 * the order they are tried after it.
 */
export const RemoteListRow = Type.Object({
  name: Type.String(),
  url: Type.String(),
  user: Type.String(),
  fingerprint: Type.String(),
  default: Type.Boolean(),
  servers: Type.Array(Type.Object({ url: Type.String(), fingerprint: Type.String(), active: Type.Boolean() })),
});
export const RemoteList = Type.Array(RemoteListRow);
export type RemoteListRow = Static<typeof RemoteListRow>;

/**
 * Maps paths under guestDir (the box's copy of an offloaded repository) to the
 * same path under root (the user's), else null: a path outside guestDir, or
 * one whose `..` or `.` segments could step out of it (box paths are the
 * box's word, not trusted). Runtime-neutral: POSIX paths, no file system.
 */
export function pathMapper(guestDir: string, root: string): (p: string) => string | null {
  const base = guestDir.replace(/\/+$/, "");
  const top = root.replace(/\/+$/, "");
  return (p) => {
    if (p === base) return top;
    if (!p.startsWith(`${base}/`)) return null;
    const parts = p
      .slice(base.length + 1)
      .split("/")
      .filter((x) => x !== "");
    if (parts.length === 0 || parts.some((x) => x === ".." || x === ".")) return null;
    return `${top}/${parts.join("/")}`;
  };
}
