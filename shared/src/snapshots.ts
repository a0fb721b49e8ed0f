// Snapshot API bodies and answers (the store itself is host/src/snapshot/).
// Create, restore, prune and check are operations (./ops.ts): NDJSON
// progress, then their result; list, browse and diff are plain answers.
import { Type, type Static } from "@sinclair/typebox";
import { BoxName, SnapshotRef } from "./api.ts";

export const SnapshotLabel = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: "^[^\\x00-\\x1f\\x7f]+$",
  description: "free text, one line",
  rule: "one line of text, without control characters",
});
/** A path inside a snapshot, relative to its root ("workspace/src/app.ts"). */
export const SnapshotPath = Type.String({ maxLength: 4096 });

// POST /v1/snapshots
export const SnapshotCreateBody = Type.Object({ box: BoxName, label: Type.Optional(SnapshotLabel) }, { additionalProperties: false });
export type SnapshotCreateBody = Static<typeof SnapshotCreateBody>;

const Count = Type.Integer({ minimum: 0 });

/** One row of the timeline. */
export const SnapshotInfo = Type.Object(
  {
    id: Type.String({ pattern: "^snap_[0-9a-z]{20}$", rule: "a snapshot id: snap_ and 20 lowercase letters or digits" }),
    /** ms since the epoch, when it was taken. */
    time: Count,
    /** The box's id, and its name when the box still exists. */
    box: Type.String(),
    boxName: Type.Optional(Type.String()),
    label: Type.Optional(Type.String()),
    parent: Type.Optional(Type.String()),
    files: Count,
    /** Bytes of file content the snapshot holds. */
    bytes: Count,
    /** Bytes it added to the store, as stored (compressed and encrypted). */
    bytesAdded: Count,
    /** Files added or changed since its parent (every file for the first). */
    filesChanged: Count,
    /** How it was read: from the box's disk (stopped) or through its guest (running). */
    via: Type.Union([Type.Literal("disk"), Type.Literal("guest")]),
    skipped: Count,
    ms: Count,
  },
  { additionalProperties: false },
);
export type SnapshotInfo = Static<typeof SnapshotInfo>;
export const SnapshotList = Type.Array(SnapshotInfo);

/** A new snapshot, and what it could not use (an unreadable parent) as warnings. */
/** What crossed from a running box's guest for a snapshot: every byte it sent, and the chunks it sent or named as sent before. */
export const SnapshotTransfer = Type.Object(
  { bytes: Count, chunksSent: Count, chunksNamed: Count, bytesNamed: Count },
  { additionalProperties: false },
);
export type SnapshotTransfer = Static<typeof SnapshotTransfer>;
export const SnapshotCreateResult = Type.Object(
  { snapshot: SnapshotInfo, warnings: Type.Array(Type.String()), transfer: Type.Optional(SnapshotTransfer) },
  { additionalProperties: false },
);
export type SnapshotCreateResult = Static<typeof SnapshotCreateResult>;

// GET /v1/snapshots/:snap/browse?path=
export const BrowseEntry = Type.Object(
  {
    name: Type.String(),
    type: Type.Union([Type.Literal("file"), Type.Literal("dir"), Type.Literal("symlink")]),
    mode: Count,
    /** ns since the epoch, decimal. */
    mtime: Type.String(),
    size: Type.Optional(Count),
    target: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
export type BrowseEntry = Static<typeof BrowseEntry>;
export const SnapshotBrowse = Type.Object(
  { snapshot: Type.String(), path: Type.String(), entries: Type.Array(BrowseEntry) },
  { additionalProperties: false },
);
export type SnapshotBrowse = Static<typeof SnapshotBrowse>;

// GET /v1/snapshots/diff?from=&to=
export const SnapshotChange = Type.Object(
  {
    path: Type.String(),
    change: Type.Union([
      Type.Literal("added"),
      Type.Literal("removed"),
      Type.Literal("modified"),
      Type.Literal("metadata"),
      Type.Literal("type"),
    ]),
    type: Type.Union([Type.Literal("file"), Type.Literal("dir"), Type.Literal("symlink")]),
    /** For a modified or added text file: its unified diff (bounded); absent for binaries, which get sizes. */
    patch: Type.Optional(Type.String()),
    binary: Type.Optional(Type.Object({ before: Count, after: Count }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type SnapshotChange = Static<typeof SnapshotChange>;
export const SnapshotDiff = Type.Object(
  { from: Type.String(), to: Type.String(), changes: Type.Array(SnapshotChange), truncated: Type.Boolean() },
  { additionalProperties: false },
);
export type SnapshotDiff = Static<typeof SnapshotDiff>;

// POST /v1/snapshots/restore
export const SnapshotRestoreBody = Type.Object(
  {
    box: BoxName,
    snapshot: SnapshotRef,
    paths: Type.Optional(Type.Array(SnapshotPath, { maxItems: 256 })),
    /** Write back over the box's own roots instead of into ~/Restored/<time>/. */
    inPlace: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SnapshotRestoreBody = Static<typeof SnapshotRestoreBody>;
export const SnapshotRestoreResult = Type.Object(
  {
    snapshot: Type.String(),
    box: Type.String(),
    into: Type.Array(Type.String()),
    files: Count,
    dirs: Count,
    symlinks: Count,
    bytes: Count,
    ms: Count,
  },
  { additionalProperties: false },
);
export type SnapshotRestoreResult = Static<typeof SnapshotRestoreResult>;

// POST /v1/snapshots/prune
const Keep = Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000 }));
export const SnapshotPruneBody = Type.Object(
  {
    keepLast: Keep,
    keepHourly: Keep,
    keepDaily: Keep,
    keepWeekly: Keep,
    keepMonthly: Keep,
    keepYearly: Keep,
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SnapshotPruneBody = Static<typeof SnapshotPruneBody>;
const Amount = Type.Object({ packs: Count, bytes: Count }, { additionalProperties: false });
export const SnapshotPruneResult = Type.Object(
  {
    forgotten: Type.Array(Type.String()),
    marked: Amount,
    deleted: Amount,
    revived: Count,
    repacked: Type.Object({ packs: Count, blobs: Count, bytes: Count }, { additionalProperties: false }),
    ms: Count,
  },
  { additionalProperties: false },
);
export type SnapshotPruneResult = Static<typeof SnapshotPruneResult>;

// POST /v1/snapshots/check
export const SnapshotCheckBody = Type.Object({ readData: Type.Optional(Type.Boolean()) }, { additionalProperties: false });
export type SnapshotCheckBody = Static<typeof SnapshotCheckBody>;
export const SnapshotCheckResult = Type.Object(
  {
    ok: Type.Boolean(),
    errors: Type.Array(Type.Object({ object: Type.String(), message: Type.String() }, { additionalProperties: false })),
    notes: Type.Array(Type.String()),
    snapshots: Count,
    trees: Count,
    packs: Count,
    packsRead: Count,
    bytesRead: Count,
    ms: Count,
  },
  { additionalProperties: false },
);
export type SnapshotCheckResult = Static<typeof SnapshotCheckResult>;
