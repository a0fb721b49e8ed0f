// How hutch's binaries are compiled, for scripts/build.ts and for the
// benchmarks that measure a piece of the host as it ships (bench/snapshot.ts).
//
// A worker's entry is an entry point of its own, so a compiled binary that
// may start one lists it: host/src/snapshot/ring-thread.ts finds them by
// these paths below host/src.

/** Every binary: minified, with bytecode, no source map. */
export const COMPILE = ["bun", "build", "--compile", "--minify", "--sourcemap=none", "--bytecode", "--format=esm"];

/** The host's worker entries. */
export const HOST_WORKERS = ["host/src/snapshot/seal-worker.ts", "host/src/snapshot/write-worker.ts"];
