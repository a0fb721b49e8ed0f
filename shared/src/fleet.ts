// A fleet's servers (host/src/fleet): each registers itself in the cluster's
// KV bucket and refreshes the entry while it runs. An entry is a node's
// heartbeat and what `hutch cluster nodes --json` prints, one per live node.
import { type Static, Type } from "@sinclair/typebox";
import { Box, BoxName } from "./api.ts";
import { Actor } from "./actor.ts";
import { idPattern } from "./ids.ts";
import { ImageName } from "./ops.ts";
import { BoxPolicy } from "./broker.ts";

/** A node's name: `--node`, unique in its fleet. */
export const FLEET_NODE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export const FleetNode = Type.Object(
  {
    name: Type.String({ pattern: FLEET_NODE_NAME.source, rule: "a node name: 1 to 64 letters, digits, _ or -" }),
    /** The hutch version the server runs. */
    version: Type.String({ maxLength: 64 }),
    /** Where it serves TLS (`--listen`), as clients dial it. */
    listen: Type.String({ maxLength: 300 }),
    /** Its TLS certificate (PEM): what another server of the fleet pins when it forwards a request there. */
    cert: Type.Optional(Type.String({ maxLength: 16384 })),
    /** What placement weighs: its CPUs and memory, the engines it runs, its labels (`hutch serve --label KEY=VALUE`). */
    cpus: Type.Optional(Type.Integer({ minimum: 0 })),
    memoryMiB: Type.Optional(Type.Integer({ minimum: 0 })),
    engines: Type.Optional(Type.Array(Type.String({ maxLength: 32 }), { maxItems: 8 })),
    labels: Type.Optional(Type.Record(Type.String({ maxLength: 63 }), Type.String({ maxLength: 128 }), { maxProperties: 32 })),
    /** The server (a hash of its host and home), so a restarted server is told from a second one under the same name. */
    instance: Type.String({ maxLength: 64 }),
    /** ms since the epoch: when it started, and when it last refreshed its entry. */
    started: Type.Integer({ minimum: 0 }),
    seen: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);
export type FleetNode = Static<typeof FleetNode>;

const Sha256 = Type.String({ pattern: "^[0-9a-f]{64}$", rule: "64 lowercase hex digits" });

/**
 * An asleep VM box carried into the fleet's store (`host/src/fleet/carry.ts`),
 * as the server that put it there hands it to the one that takes it out: the
 * snapshot holding its files (disk overlay, sleeping state, read-only disks,
 * and a sealed manifest with its row and broker policy), and what the taker
 * must have before it starts (the image, a QEMU that loads the state). Small
 * and free of secrets: the box's stubs are in the sealed snapshot.
 */
export const CarriedBox = Type.Object(
  {
    v: Type.Literal(1),
    snapshot: Type.String({ pattern: idPattern("snap"), rule: "a snapshot id: snap_ and 20 lowercase letters or digits" }),
    box: Type.Object(
      {
        id: Type.String({ pattern: idPattern("box"), rule: "a box id: box_ and 20 lowercase letters or digits" }),
        name: BoxName,
        engine: Type.Literal("qemu"),
      },
      { additionalProperties: false },
    ),
    /** The image the box's disk is an overlay of: its name where the box was, and its root disk's sha256 (manifest.json). */
    image: Type.Object({ name: ImageName, digest: Sha256 }, { additionalProperties: false }),
    /** The QEMU that saved the state: the taker's must be the same version, on the same architecture, under the same accelerator. */
    qemu: Type.Object(
      {
        version: Type.String({ maxLength: 128 }),
        arch: Type.Union([Type.Literal("x86_64"), Type.Literal("aarch64")]),
        accel: Type.Union([Type.Literal("kvm"), Type.Literal("hvf"), Type.Literal("whpx"), Type.Literal("tcg")]),
      },
      { additionalProperties: false },
    ),
    /** The carried files' bytes, and what the store added for them (less when it held some of their chunks already). */
    bytes: Type.Integer({ minimum: 0 }),
    stored: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);
export type CarriedBox = Static<typeof CarriedBox>;

/** A box's settings as another server of the fleet makes it again (a failover, a move). */
export const BoxSpec = Type.Object(
  {
    engine: Type.String({ maxLength: 32 }),
    config: Type.Record(
      Type.String({ maxLength: 64 }),
      Type.Union([Type.String({ maxLength: 1024 }), Type.Number(), Type.Boolean(), Type.Null()]),
      { maxProperties: 32 },
    ),
    /** Its egress policy as the broker reads it (allowlist, bindings, and unlisted and approvalTimeoutMs when set). */
    ...BoxPolicy.properties,
  },
  { additionalProperties: false },
);
export type BoxSpec = Static<typeof BoxSpec>;

/**
 * A box in the fleet's directory (KV bucket hutch-boxes, key: its id): the
 * node that runs it puts the box as it shows it, and its owner, whenever it
 * changes, and deletes the entry when the box goes. Every server reads the
 * directory to list the fleet's boxes and to find where one runs.
 */
export const FleetBox = Type.Object(
  {
    node: Type.String({ pattern: FLEET_NODE_NAME.source, rule: "a node name: 1 to 64 letters, digits, _ or -" }),
    owner: Type.String({ maxLength: 128 }),
    /** What it is given, as quotas and placement count it (no CPU limit: 1; no memory limit: 512 MiB). */
    cpus: Type.Integer({ minimum: 0 }),
    memoryMiB: Type.Integer({ minimum: 0 }),
    box: Box,
    /**
     * Which placement of the box this is: 1 when made, one more at each move
     * or failover. A server whose copy of a box carries an older epoch than
     * the directory's has been superseded: it stops that copy and writes
     * nothing for it.
     */
    epoch: Type.Optional(Type.Integer({ minimum: 1 })),
    /** What another server needs to make the box again: its engine, settings and egress policy. */
    spec: Type.Optional(BoxSpec),
    /**
     * Set while the box is being taken to `node` (it runs nowhere until that
     * server has made it): from where, why, and from what (a checkpoint, or a
     * VM's carried sleeping state).
     */
    moving: Type.Optional(
      Type.Object(
        {
          from: Type.String({ pattern: FLEET_NODE_NAME.source, rule: "a node name: 1 to 64 letters, digits, _ or -" }),
          reason: Type.Union([Type.Literal("move"), Type.Literal("drain"), Type.Literal("failover")]),
          snapshot: Type.Optional(Type.String({ maxLength: 64 })),
          carried: Type.Optional(CarriedBox),
          by: Type.Optional(Actor),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type FleetBox = Static<typeof FleetBox>;

/**
 * A fleet transition (`hutch fleet events`): a box made, changing state or
 * deleted on a node; a node joining or leaving. `seq` is the event's place in
 * the fleet's event stream: `--from SEQ` resumes there.
 */
export const FleetEvent = Type.Object(
  {
    seq: Type.Integer({ minimum: 1 }),
    at: Type.String(),
    kind: Type.Union([
      Type.Literal("box.created"),
      Type.Literal("box.state"),
      Type.Literal("box.deleted"),
      Type.Literal("box.moved"),
      Type.Literal("node.cordoned"),
      Type.Literal("node.uncordoned"),
      Type.Literal("lease.taken"),
      Type.Literal("node.joined"),
      Type.Literal("node.left"),
    ]),
    node: Type.String({ pattern: FLEET_NODE_NAME.source, rule: "a node name: 1 to 64 letters, digits, _ or -" }),
    box: Type.Optional(
      Type.Object({ id: Type.String({ maxLength: 64 }), name: Type.String({ maxLength: 64 }), state: Type.String({ maxLength: 32 }) }),
    ),
    /** What else there is to say: a move's from and to, a lease's epoch. */
    detail: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);
export type FleetEvent = Static<typeof FleetEvent>;

/** `hutch node list`: a live server, whether it is cordoned, how many boxes it runs, and whether it leads the reconcile loop. */
export const FleetNodeRow = Type.Object(
  {
    node: FleetNode,
    cordoned: Type.Boolean(),
    boxes: Type.Integer({ minimum: 0 }),
    leader: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type FleetNodeRow = Static<typeof FleetNodeRow>;

/** POST /v1/fleet/boxes/:ref/move (`hutch box move BOX [--to NODE]`): no `to`, placement picks. */
export const BoxMoveBody = Type.Object(
  { to: Type.Optional(Type.String({ pattern: FLEET_NODE_NAME.source, rule: "a node name: 1 to 64 letters, digits, _ or -" })) },
  { additionalProperties: false },
);
export type BoxMoveBody = Static<typeof BoxMoveBody>;

/** A box moved: from where to where, under which epoch, what carried it, how long it took. */
export const BoxMoveResult = Type.Object(
  {
    box: Type.String(),
    id: Type.String(),
    from: Type.String(),
    to: Type.String(),
    epoch: Type.Integer({ minimum: 1 }),
    snapshot: Type.Optional(Type.String()),
    programsKept: Type.Boolean(),
    ms: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);
export type BoxMoveResult = Static<typeof BoxMoveResult>;

/** `hutch node drain NODE`: each box moved off it, and those that could not be (with why). */
export const NodeDrainResult = Type.Object(
  {
    node: Type.String(),
    moved: Type.Array(BoxMoveResult),
    failed: Type.Array(Type.Object({ box: Type.String(), error: Type.String() })),
  },
  { additionalProperties: false },
);
export type NodeDrainResult = Static<typeof NodeDrainResult>;
