// What needs no schema: named errors, the version, the idempotency header,
// the frame codec and the multiplexer. The CLI's hot paths (`hutch exec`,
// `hutch --version`, the box and session verbs) import only this entry
// (`@hutch/shared/base`): the schema library and the schemas built at load
// cost every program that evaluates them ~5 ms of start-up, in a CLI whose
// whole round trip is ~12 ms (scripts/bench/README.md, cli.ts).
export * from "./errors.ts";
export * from "./version.ts";
export * from "./idempotency.ts";
export * from "./names.ts";
export * from "./limits.ts";
export * from "./protocol/codec.ts";
export * from "./protocol/mux.ts";
export * from "./text/terminal.ts";
