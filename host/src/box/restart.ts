// A box's restart policy and checkpoints (`box create --restart always
// --checkpoint-every 10m`), kept in its config: `restart`, `checkpointEveryS`,
// and the latest checkpoint taken, `checkpointSnapshot` and `checkpointAt`
// (flat keys, so a fleet's BoxSpec carries them as they are).
import { type Box, type BoxCreateBody, HutchError, parseDuration } from "@hutch/shared";

/** The shortest period between two checkpoints: each is a snapshot of the whole box. */
export const MIN_CHECKPOINT_S = 10;

/** The config keys a create asks for. */
export function restartConfig(body: Pick<BoxCreateBody, "restart" | "checkpointEvery">): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (body.restart === "always") out.restart = "always";
  if (body.checkpointEvery !== undefined) {
    const ms = parseDuration(body.checkpointEvery);
    if (ms === null || ms < MIN_CHECKPOINT_S * 1000)
      throw new HutchError(
        "invalid",
        `--checkpoint-every "${body.checkpointEvery}" is not a duration of at least ${MIN_CHECKPOINT_S} s`,
        "give one like 30s, 10m or 1h",
      );
    out.checkpointEveryS = Math.round(ms / 1000);
  }
  return out;
}

/** What a box shows of them. */
export function restartInfo(config: Record<string, unknown>): Pick<Box, "restart" | "checkpoint"> {
  const every = typeof config.checkpointEveryS === "number" ? config.checkpointEveryS : undefined;
  const snapshot = typeof config.checkpointSnapshot === "string" ? config.checkpointSnapshot : undefined;
  const at = typeof config.checkpointAt === "string" ? config.checkpointAt : undefined;
  return {
    ...(config.restart === "always" ? { restart: "always" as const } : {}),
    ...(every !== undefined ? { checkpoint: { everyS: every, ...(snapshot && at ? { last: { snapshot, at } } : {}) } } : {}),
  };
}

/** The latest checkpoint a box's config names, if any. */
export function lastCheckpoint(config: Record<string, unknown>): string | undefined {
  return typeof config.checkpointSnapshot === "string" ? config.checkpointSnapshot : undefined;
}
