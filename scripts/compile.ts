// How hutch's binaries are compiled, for scripts/build.ts and for the
// benchmarks that measure a piece of the host as it ships (bench/snapshot.ts).
//
// A worker's entry is an entry point of its own, so a compiled binary that
// may start one lists it: host/src/snapshot/ring-thread.ts finds them by
// these paths below host/src.

/**
 * Every binary: minified, with bytecode, no source map, and nothing read
 * from the directory it runs in. A compiled Bun program otherwise loads
 * `.env` and `bunfig.toml` from its working directory, and a bunfig's
 * `preload` runs the scripts it names before hutch's first line: any
 * repository a user runs hutch in (one a box's work was brought home to)
 * could run code on the host, or set HUTCH_HOME. tsconfig.json and
 * package.json are off by default; said here so it stays so.
 */
export const COMPILE = [
  "bun",
  "build",
  "--compile",
  "--minify",
  "--sourcemap=none",
  "--bytecode",
  "--format=esm",
  "--no-compile-autoload-dotenv",
  "--no-compile-autoload-bunfig",
  "--no-compile-autoload-tsconfig",
  "--no-compile-autoload-package-json",
];

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
