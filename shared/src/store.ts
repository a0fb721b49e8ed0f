// What the snapshot store (host/src/snapshot) needs, and nothing else: named
// errors, ids, the exclude rules, the chunker and the schema checks. The
// store imports only this entry (`@hutch/shared/store`): a process that runs
// just the store (scripts/bench/snapshot.ts runs each step in one, as restic
// runs) paid ~12 MiB of RSS and ~0.1 s for the whole barrel's schemas, which
// it never uses. In the daemon they are loaded anyway.
export * from "./errors.ts";
export * from "./ids.ts";
export * from "./ignore.ts";
export * from "./chunk/index.ts";
export * from "./validate.ts";
