// A large restore's second core (ring-thread.ts): the restoring thread reads,
// decrypts, decompresses and checks; the file writer (write-worker.ts)
// creates the small files and hard links, which is where a restore of many
// files spends its time (in the kernel, allocating inodes), so the two
// overlap. Larger files, directories and symlinks stay with the restoring
// thread: a file's directory exists before its job is queued, and a
// directory's metadata is applied after flush().
import { RingThread } from "./ring-thread.ts";
import type { WriteJob } from "./restore-files.ts";

/** Bytes of small files waiting to be written, at most. */
const RING_BYTES = 4 * 1024 * 1024;

/** The writer reports, per batch, how many extended attributes the destination refused. */
export class WriteThread extends RingThread<null, WriteJob, number, null> {
  constructor(onDone: (xattrsRefused: number) => void) {
    super("write-worker.ts", "the restore's file writer", null, RING_BYTES, onDone);
  }
}
