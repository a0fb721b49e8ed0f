// The Unpacker: a TarParser feeding an Extractor, with calls serialised and any
// failure tearing down the staging directory.
import { TarError } from "../../src/tar/error.ts";
import { type ExactFs, Extractor } from "./extract.ts";
import { TarParser } from "../../src/tar/parse.ts";

export interface Unpacker {
  /** Resolves once this chunk's content is on disk, so callers can apply backpressure. */
  write(chunk: Uint8Array): Promise<void>;
  /** Checks the archive is complete, then moves the result into destDir. */
  end(): Promise<{ entries: number; bytes: number }>;
  /** Stops and removes everything this unpacker staged; nothing is moved into destDir. */
  abort(): Promise<void>;
}

export interface UnpackOptions {
  /** Replaces the first path component of every entry; all entries must share one. */
  topName?: string;
  /** Bound on total entry body bytes (default 8 GiB). */
  maxBytes?: number;
  /** Bound on entries (default 1,000,000). */
  maxEntries?: number;
  /**
   * Permission bits cleared from every file and directory, as tar
   * --no-same-permissions applies the umask (default none: the archive's bits).
   * Setuid, setgid and sticky are cleared whatever this says.
   */
  umask?: number;
  /** Owner of every entry made (a guest running as root unpacking for the box's user); default: whoever unpacks. */
  owner?: { uid: number; gid: number };
  /** Take hard link entries to files this archive wrote, and exact (pax) mtimes (a snapshot restored into a box). */
  links?: boolean;
  /** With `links`: ns mtimes and extended attributes through the caller's libc (the guest's; node:fs has neither). */
  exact?: ExactFs;
}

const DEFAULT_MAX_BYTES = 8 * 1024 ** 3;
const DEFAULT_MAX_ENTRIES = 1_000_000;
/** A pax or GNU long-name body bigger than this is hostile: PATH_MAX is 4 KiB. */
const MAX_META = 1024 * 1024;

/**
 * Extracts an archive streamed in by `write` into `destDir`, via a staging
 * directory `destDir/.hutch-unpack-*` so a refused archive leaves nothing behind.
 */
export function createUnpacker(destDir: string, opts: UnpackOptions = {}): Unpacker {
  const extractor = new Extractor(destDir, 0o777 & ~(opts.umask ?? 0), opts.owner, opts.links ? opts.exact : undefined);
  const parser = new TarParser(extractor, {
    topName: opts.topName,
    meta: opts.links === true,
    maxBytes: opts.maxBytes ?? DEFAULT_MAX_BYTES,
    maxEntries: opts.maxEntries ?? DEFAULT_MAX_ENTRIES,
    maxMeta: MAX_META,
  });
  let failure: unknown;
  let ended = false;
  // Calls run one at a time in call order, even if a caller does not await.
  let queue: Promise<unknown> = Promise.resolve();

  const run = <T>(step: () => Promise<T>): Promise<T> => {
    const result = queue.then(async () => {
      if (failure !== undefined) throw failure;
      if (ended) throw new TarError("unpacker already ended");
      try {
        return await step();
      } catch (err) {
        failure = err;
        await extractor.cleanup();
        throw err;
      }
    });
    queue = result.catch(() => undefined);
    return result;
  };

  return {
    write: (chunk) => run(() => parser.push(chunk)),
    end: () =>
      run(async () => {
        parser.finish();
        await extractor.commit();
        ended = true;
        return { entries: parser.entries, bytes: parser.bytes };
      }),
    abort: () => {
      failure ??= new TarError("extraction aborted");
      // Queued behind any write in progress, so cleanup never races a file write.
      const done = queue.then(() => extractor.cleanup());
      queue = done.catch(() => undefined);
      return done;
    },
  };
}
