export * from "./protocol/codec.ts";
export * from "./protocol/mux.ts";
export * from "./protocol/tools.ts";
export * from "./ids.ts";
export * from "./errors.ts";
export * from "./api.ts";
export * from "./version.ts";
export * from "./validate.ts";
