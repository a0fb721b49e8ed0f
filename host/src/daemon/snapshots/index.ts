// HTTP for snapshots. Create, restore, prune and check are operations
// (daemon/ops.ts: NDJSON progress, then the result); the timeline, browse and
// diff are plain answers. No logic here: host/src/snapshot/service.ts.
import { Elysia, t } from "elysia";
import {
  SnapshotBrowse,
  SnapshotCheckBody,
  SnapshotCreateBody,
  SnapshotDiff,
  SnapshotList,
  SnapshotPath,
  SnapshotPruneBody,
  SnapshotRef,
  SnapshotRestoreBody,
  BoxName,
} from "@hutch/shared";
import type { SnapshotService } from "../../snapshot/service.ts";
import { opResponse, type RunningOps } from "../ops.ts";

/**
 * Whose snapshots a request may reach (server mode): it sees its own, and may
 * take or restore one only into a box it owns or drives. Checks throw the
 * error to answer; another user's snapshot is answered as a missing one.
 */
export interface SnapshotAccess {
  visible(req: Request, snapId: string): boolean;
  box(req: Request, boxRef: string): void;
  snapshot(req: Request, ref: string): Promise<void>;
}

const OPEN: SnapshotAccess = { visible: () => true, box: () => {}, snapshot: async () => {} };

export function snapshotsController(snapshots: SnapshotService, running: RunningOps, access: SnapshotAccess = OPEN) {
  return new Elysia({ prefix: "/v1/snapshots", tags: ["snapshots"], normalize: false })
    .get("/", async ({ query, request }) => (await snapshots.list(query.box)).filter((s) => access.visible(request, s.id)), {
      query: t.Object({
        box: t.Optional(
          t.Union([BoxName, t.String({ pattern: "^box_[0-9a-z]+$", rule: "a box id: box_ and lowercase letters or digits" })]),
        ),
      }),
      response: SnapshotList,
      detail: { summary: "The timeline: every snapshot, oldest first (of one box with ?box=)" },
    })
    .post(
      "/",
      ({ body, request }) => {
        access.box(request, body.box);
        return opResponse("snapshot.create", request, running, (report, signal) => snapshots.create(body.box, body.label, report, signal));
      },
      {
        body: SnapshotCreateBody,
        detail: {
          summary:
            "Snapshot a box's /workspace and home: from its disk when stopped, through its guest when running (NDJSON: progress, then the snapshot)",
        },
      },
    )
    .get(
      "/diff",
      async ({ query, request }) => {
        await access.snapshot(request, query.from);
        await access.snapshot(request, query.to);
        return snapshots.diff(query.from, query.to);
      },
      {
        query: t.Object({ from: SnapshotRef, to: SnapshotRef }),
        response: SnapshotDiff,
        detail: { summary: "What changed between two snapshots: paths, text hunks, binary sizes" },
      },
    )
    .get(
      "/:snap/browse",
      async ({ params, query, request }) => {
        await access.snapshot(request, params.snap);
        return snapshots.browse(params.snap, query.path ?? "");
      },
      {
        params: t.Object({ snap: SnapshotRef }),
        query: t.Object({ path: t.Optional(SnapshotPath) }),
        response: SnapshotBrowse,
        detail: { summary: "A directory of a snapshot (or the one entry a file path names)" },
      },
    )
    .post(
      "/restore",
      async ({ body, request }) => {
        access.box(request, body.box);
        await access.snapshot(request, body.snapshot);
        return opResponse("snapshot.restore", request, running, (report, signal) => snapshots.restore(body, report, signal));
      },
      {
        body: SnapshotRestoreBody,
        detail: {
          summary: "Restore a snapshot (or some paths) into a box: ~/Restored/<time>/ by default, over its roots with inPlace (NDJSON)",
        },
      },
    )
    .post(
      "/prune",
      ({ body, request }) => opResponse("snapshot.prune", request, running, (report, signal) => snapshots.prune(body, report, signal)),
      {
        body: SnapshotPruneBody,
        detail: { summary: "Forget snapshots by policy and reclaim space in two phases; never blocks a snapshot (NDJSON)" },
      },
    )
    .post(
      "/check",
      ({ body, request }) =>
        opResponse("snapshot.check", request, running, (report, signal) => snapshots.check(body.readData ?? false, report, signal)),
      {
        body: SnapshotCheckBody,
        detail: { summary: "Check the store: every snapshot whole; with readData, every pack read and authenticated (NDJSON)" },
      },
    );
}
