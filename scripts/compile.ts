// How hutch's binaries are compiled, for scripts/build.ts and for the
// benchmarks that measure a piece of the host as it ships (bench/snapshot.ts).
//
// A worker's entry is an entry point of its own, so a compiled binary that
// may start one lists it: host/src/snapshot/ring-thread.ts finds them by
// these paths below host/src.

/** Every binary: minified, with bytecode, no source map. */
export const COMPILE = ["bun", "build", "--compile", "--minify", "--sourcemap=none", "--bytecode", "--format=esm"];

/**
 * The host: it splits, so a module reached only through import() becomes a
 * chunk of its own, read and evaluated when it is first imported (without
 * it every verb paid ~9 ms to load the whole bundle, daemon included,
 * before its first statement: scripts/bench/README.md, cli.ts). Its root is
 * host/src, whatever the entry points, so the workers' paths in the binary
 * are the ones ring-thread.ts names.
 */
export const HOST_COMPILE = [...COMPILE, "--splitting", "--root", "host/src"];

/** The host's worker entries. */
export const HOST_WORKERS = ["host/src/snapshot/seal-worker.ts", "host/src/snapshot/write-worker.ts"];
