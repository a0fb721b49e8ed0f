// Sealing new blobs into packs: compress, encrypt, append to the open pack of
// the blob's type (data and tree blobs apart, so the small tree blobs a browse
// or a diff reads sit together), finish the pack when it reaches the target.
// One implementation for both places a save seals: on its own thread while it
// is small, and in the seal worker (seal-thread.ts) once it is large. What a
// Sealer finishes is a closed file in the backend's staging directory; the
// uploading and indexing stay with the BlobWriter.
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { compressSync } from "./compress.ts";
import { MemoryGuard } from "./memory.ts";
import { type BlobType, PackWriter } from "./pack.ts";

/** A finished pack, not yet uploaded. */
export interface SealedPack {
  type: BlobType;
  /** The SHA-256 of its bytes: its name in the store. */
  name: string;
  size: number;
  /** Its file in the staging directory (putFile makes it durable). */
  path: string;
  /** Its blobs, as the pack's header lists them (pack.ts putEntry): one buffer, cheap to post between threads. */
  entries: Uint8Array;
}

export interface SealerConfig {
  enc: Uint8Array;
  /** The backend's staging directory. Files are named `<pid>-<uuid>`, so a sweep finds those of dead processes. */
  stagingDir: string;
  packBytes: number;
}

export class Sealer {
  private readonly packs: Partial<Record<BlobType, PackWriter>> = {};
  // The compressed copy and the ciphertext are garbage as soon as they are written.
  private readonly memory = new MemoryGuard(4 * 1024 * 1024);

  constructor(private readonly config: SealerConfig) {}

  /** Seals one blob; returns its stored length (ciphertext and tag) and the pack it filled, if it filled one. */
  add(type: BlobType, id: Uint8Array, plain: Uint8Array): { stored: number; filled?: SealedPack } {
    const c = compressSync(plain);
    let pack = this.packs[type];
    if (!pack) {
      pack = new PackWriter(this.config.enc, join(this.config.stagingDir, `${process.pid}-${randomUUID()}`), this.config.packBytes);
      this.packs[type] = pack;
    }
    const entry = pack.add(type, id, c.data, c.compressed, plain.length);
    this.memory.drop((c.compressed ? c.data.length : 0) + entry.length);
    const filled = pack.size >= this.config.packBytes ? this.finish(type) : undefined;
    return filled ? { stored: entry.length, filled } : { stored: entry.length };
  }

  /** Finishes the open pack of a type, if there is one. */
  finish(type: BlobType): SealedPack | undefined {
    const pack = this.packs[type];
    if (!pack) return undefined;
    delete this.packs[type];
    const { name, size, entries } = pack.finish();
    return { type, name, size, path: pack.path, entries };
  }

  /** Finishes every open pack. */
  finishAll(): SealedPack[] {
    return (["data", "tree"] as const).map((t) => this.finish(t)).filter((p) => p !== undefined);
  }

  /** Drops the open packs and their files (a save that failed). */
  discard(): void {
    for (const t of ["data", "tree"] as const) {
      this.packs[t]?.discard();
      delete this.packs[t];
    }
  }
}
