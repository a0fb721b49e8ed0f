// The messages between a BlobWriter and its seal worker (seal-thread.ts,
// seal-worker.ts). Both sides run this host's code in one process, so the
// shapes are checked by the type system, not at run time.
import type { BlobType } from "./pack.ts";
import type { SealedPack, SealerConfig } from "./sealer.ts";

/** One blob to seal: its plaintext at [off, off + len) of the ring, or in `bytes` when it was too large for the ring. */
export interface BlobJob {
  type: BlobType;
  id: Uint8Array;
  off: number;
  len: number;
  bytes?: Uint8Array;
}

export type ToSealer =
  /** `control`: Int32 [ready, batches sealed], then a BigInt64 of the ring position sealed to (seal-thread.ts). */
  | { t: "init"; config: SealerConfig; ring: SharedArrayBuffer; control: SharedArrayBuffer }
  /** `end`: the ring position after the batch's last blob, handed back once the worker holds no view of it. */
  | { t: "seal"; jobs: BlobJob[]; end: number }
  | { t: "flush" }
  | { t: "discard" };

export type FromSealer =
  | { t: "ready" }
  | { t: "sealed"; end: number; stored: number; packs: SealedPack[] }
  | { t: "flushed"; packs: SealedPack[] }
  | { t: "discarded" }
  | { t: "failed"; error: string };
