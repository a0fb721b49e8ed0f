// Content-defined chunking for snapshots: the host and the guest cut files the same way.
export { CHUNK_LIMITS, Chunker, ChunkParamsError, checkChunkParams, deriveGear, type ChunkParams } from "./fastcdc.ts";
