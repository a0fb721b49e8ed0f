// The tar format, runtime-neutral: a streaming parser that checks every name
// and link target, and the named error. The writer and the unpacker touch the
// file system, so they live in shared/node (`@hutch/shared/node`).
export { TarError } from "./error.ts";
export { TarParser, type Entry as TarEntry, type EntrySink as TarSink } from "./parse.ts";
