// What both ends of the agent channel share, and nothing else: the frame codec,
// the multiplexer, the tool schemas, ids, the tar format, the snapshot exclude
// rules and chunking. hutch-guest imports only this entry
// (`@hutch/shared/wire`) and the tar writer and unpacker that need a file
// system (`@hutch/shared/node`): every module it evaluates at start-up is
// paid again under tcg at ~100x the host's cost (the API, event and broker
// schemas cost a VM box ~0.4 s of boot before they were left out).
export * from "./protocol/codec.ts";
export * from "./protocol/mux.ts";
export * from "./protocol/tools.ts";
export * from "./protocol/mcp-tools.ts";
export * from "./protocol/socket-join.ts";
export * from "./ids.ts";
export * from "./errors.ts";
export * from "./version.ts";
export * from "./tar/index.ts";
export * from "./ignore.ts";
export * from "./chunk/index.ts";
