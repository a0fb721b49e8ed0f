// Warm pools (host/src/box/pool.ts): a number of sleeping, pre-booted boxes
// of one image and engine that each server keeps ready, so `box create` can
// claim one instead of booting. The wanted size is the fleet's (KV bucket
// hutch-pools) or, without a fleet, the server's own; each server keeps its
// own N.
import { type Static, Type } from "@sinclair/typebox";
import { EngineName } from "./api.ts";

/** An image's name, as `box create --image` takes it. */
export const PoolImage = Type.String({
  pattern: "^[a-z0-9][a-z0-9._-]{0,63}$",
  title: "image",
  rule: "use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
});

/** Most boxes one pool keeps ready on a server. */
export const POOL_MAX_WARM = 64;

/**
 * A pool as it is wanted: its image and engine (the pool's key), how many
 * boxes each server keeps ready, and the limits its boxes are made with (a
 * create asking other limits is not given one of them).
 */
export const PoolSpec = Type.Object(
  {
    image: PoolImage,
    engine: EngineName,
    warm: Type.Integer({ minimum: 1, maximum: POOL_MAX_WARM }),
    cpus: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
    memoryMiB: Type.Optional(Type.Integer({ minimum: 64, maximum: 1048576 })),
    disk: Type.Optional(Type.String({ pattern: "^[1-9][0-9]{0,6}[MGT]$", rule: "a size in M, G or T, e.g. 20G" })),
  },
  { additionalProperties: false },
);
export type PoolSpec = Static<typeof PoolSpec>;

/** PUT /v1/pools: sets a pool's size (warm 0 removes it and its boxes). */
export const PoolSetBody = Type.Object(
  {
    image: PoolImage,
    engine: Type.Optional(EngineName),
    warm: Type.Integer({ minimum: 0, maximum: POOL_MAX_WARM }),
    cpus: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
    memoryMiB: Type.Optional(Type.Integer({ minimum: 64, maximum: 1048576 })),
    disk: Type.Optional(Type.String({ pattern: "^[1-9][0-9]{0,6}[MGT]$", rule: "a size in M, G or T, e.g. 20G" })),
  },
  { additionalProperties: false },
);
export type PoolSetBody = Static<typeof PoolSetBody>;

/** One pool on one server, as `hutch pool list` shows it. */
export const PoolStatus = Type.Object(
  {
    image: PoolImage,
    engine: EngineName,
    /** The server (a fleet's node name; "local" without a fleet). */
    server: Type.String({ maxLength: 64 }),
    /** Boxes it should hold ready. */
    wanted: Type.Integer({ minimum: 0 }),
    /** Boxes asleep and ready to claim. */
    ready: Type.Integer({ minimum: 0 }),
    /** Boxes being booted to refill it. */
    filling: Type.Integer({ minimum: 0 }),
    /** Boxes that failed to boot since the pool was set (each one is thrown away and tried again). */
    failed: Type.Integer({ minimum: 0 }),
    /** The last boot failure, for the operator. */
    lastError: Type.Optional(Type.String({ maxLength: 2048 })),
    cpus: Type.Optional(Type.Integer({ minimum: 1 })),
    memoryMiB: Type.Optional(Type.Integer({ minimum: 1 })),
    disk: Type.Optional(Type.String({ maxLength: 16 })),
  },
  { additionalProperties: false },
);
export type PoolStatus = Static<typeof PoolStatus>;

/** A server's pools, as it puts them in the fleet's bucket for the others' `pool list` (key: status.<node>). */
export const PoolServerStatus = Type.Object(
  { node: Type.String({ maxLength: 64 }), at: Type.Integer({ minimum: 0 }), pools: Type.Array(PoolStatus, { maxItems: 256 }) },
  { additionalProperties: false },
);
export type PoolServerStatus = Static<typeof PoolServerStatus>;

/** DELETE /v1/pools/:engine/:image. */
export const PoolCleared = Type.Object({ image: PoolImage, engine: EngineName, cleared: Type.Boolean() }, { additionalProperties: false });
export type PoolCleared = Static<typeof PoolCleared>;
