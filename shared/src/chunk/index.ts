// Content-defined chunking for snapshots: the host and the guest cut files the same way.
export { CHUNK_LIMITS, Chunker, ChunkParamsError, checkChunkParams, deriveGear, type ChunkParams } from "./fastcdc.ts";
// What a guest sends for snap.out: entries and chunks as records.
export * from "./records.ts";
