// Safe streaming tar: packTar carries trees into and out of boxes; createUnpacker
// extracts archives that may come from an untrusted box.
export { packTar, readRuleFile } from "./pack.ts";
export { createUnpacker, type Unpacker, type UnpackOptions } from "./unpack.ts";
export type { ExactFs } from "./extract.ts";
export { TarError } from "./error.ts";
export { TarParser, type Entry as TarEntry, type EntrySink as TarSink } from "./parse.ts";
