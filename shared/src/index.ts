export * from "./wire.ts";
export * from "./api.ts";
export * from "./validate.ts";
export * from "./events.ts";
export * from "./broker.ts";
export * from "./summary.ts";
export * from "./ide.ts";
export * from "./protocol/follow.ts";
