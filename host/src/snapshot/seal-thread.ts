// A large save's second core (ring-thread.ts): the saving thread reads,
// chunks, hashes and dedups; the seal worker (seal-worker.ts) compresses,
// encrypts and writes packs.
//
// Measured on scripts/bench's tree (20k small files, 300 MiB of large ones,
// 2 cores): a first save took 2.4–2.7 s sealing on the saving thread, where
// sealing was half of its CPU; 1.8–2.0 s with the worker (README,
// "measurements").
import type { BlobType } from "./pack.ts";
import { RingThread } from "./ring-thread.ts";
import type { SealedPack, SealerConfig } from "./sealer.ts";

/** Plaintext waiting to be sealed, at most: the default largest chunk (8 MiB was no faster, ~4 MB more). */
const RING_BYTES = 4 * 1024 * 1024;

export interface SealJob {
  type: BlobType;
  id: Uint8Array;
}

/** What the worker reports for a batch: the stored bytes of its blobs and the packs they filled. */
export interface SealDone {
  stored: number;
  packs: SealedPack[];
}

export class SealThread extends RingThread<SealerConfig, SealJob, SealDone, SealedPack[]> {
  constructor(config: SealerConfig, onSealed: (done: SealDone) => void) {
    super("seal-worker.ts", "the seal worker", config, RING_BYTES, onSealed);
  }
}
