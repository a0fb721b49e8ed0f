// The part of shared/ that needs Node's file system API (node:fs, node:path),
// which Bun provides too: the tar writer that carries trees into and out of
// boxes and the unpacker for archives that may come from an untrusted box.
// Both ends of the agent channel use it (the host and hutch-guest); the
// extension and anything runtime-neutral import from shared/src instead.
export { packTar, readRuleFile } from "./tar/pack.ts";
export { createUnpacker, type Unpacker, type UnpackOptions } from "./tar/unpack.ts";
export type { ExactFs } from "./tar/extract.ts";
