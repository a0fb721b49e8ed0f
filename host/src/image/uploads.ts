// Image imports through the daemon (shared/src/images.ts): an upload is an
// import (./import.ts) fed with the archive's bytes in order, chunk by chunk,
// each PATCH saying the offset it continues from, then installed by an
// operation. The rules: one chunk at a time per upload; a chunk over the
// bound, past the declared size or out of order is refused naming the
// offset to send from; an upload that hears nothing for IMAGE_LIMITS.idleMs,
// whose install's client goes away, or whose archive turns out malformed is
// dropped with its staging; at most MAX_UPLOADS at once (each holds staging
// the size of an image).
import { mkdirSync, statfsSync } from "node:fs";
import {
  HutchError,
  IMAGE_LIMITS,
  newId,
  type ImageImportResult,
  type ImageImportStart,
  type ImageUpload,
  type OpReport,
} from "@hutch/shared";
import { beginImport, type PendingImport } from "./import.ts";
import { imagesDir, overlayUsers, type ImageUsers } from "./store.ts";

const MAX_UPLOADS = 4;

interface Upload {
  id: string;
  bytes: number;
  received: number;
  /** A chunk is being received, or the install runs. */
  busy: boolean;
  pending: PendingImport;
  idle: ReturnType<typeof setTimeout>;
}

const again = "start it again: hutch image import FILE";

export class ImageImports {
  private readonly uploads = new Map<string, Upload>();

  constructor(
    private readonly home: string,
    private readonly users: () => ImageUsers = () => overlayUsers(home),
    private readonly idleMs: number = IMAGE_LIMITS.idleMs,
  ) {}

  /** Opens an upload of `body.bytes` bytes (refused when the name is taken without force, or the disk lacks the room). */
  start(body: ImageImportStart): ImageUpload {
    if (this.uploads.size >= MAX_UPLOADS)
      throw new HutchError("conflict", `${MAX_UPLOADS} image imports are under way already`, "wait for one to finish");
    const dir = imagesDir(this.home);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const fs = statfsSync(dir);
    const free = fs.bavail * fs.bsize;
    if (body.bytes > free)
      throw new HutchError(
        "invalid",
        `the archive is ${body.bytes} bytes and ${dir} has ${free} free`,
        "free some space on the server (hutch image rm NAME), then import again",
      );
    const id = newId("upl");
    const pending = beginImport({
      home: this.home,
      source: body.file ?? `import ${id}`,
      ...(body.name !== undefined ? { name: body.name } : {}),
      force: body.force ?? false,
      users: this.users(),
    });
    const upload: Upload = { id, bytes: body.bytes, received: 0, busy: false, pending, idle: this.idleTimer(id) };
    this.uploads.set(id, upload);
    return this.state(upload);
  }

  /** Appends one chunk at `offset` (which must be what was received so far); the upload's state after it. */
  async write(id: string, offset: number, chunk: ReadableStream<Uint8Array> | null): Promise<ImageUpload> {
    const u = this.claim(id);
    try {
      if (offset !== u.received)
        throw new HutchError(
          "conflict",
          `import ${id} has ${u.received} bytes; this chunk starts at ${offset}`,
          `send the archive from byte ${u.received}`,
          { received: u.received },
        );
      let got = 0;
      for await (const piece of chunk ?? []) {
        got += piece.byteLength;
        if (got > IMAGE_LIMITS.chunkBytes)
          throw this.fail(u, new HutchError("invalid", `a chunk is over ${IMAGE_LIMITS.chunkBytes} bytes`, "send smaller chunks"));
        if (u.received + piece.byteLength > u.bytes)
          throw this.fail(u, new HutchError("invalid", `import ${id} brought more than the ${u.bytes} bytes it declared`, again));
        await u.pending.write(piece).catch((err) => {
          throw this.fail(u, err);
        });
        u.received += piece.byteLength;
      }
      return this.state(u);
    } finally {
      this.release(u);
    }
  }

  /**
   * Claims a complete upload for its install (before the answer starts, so a
   * refusal is an ordinary error) and returns the install to run.
   */
  install(id: string): (report: OpReport, signal: AbortSignal) => Promise<ImageImportResult> {
    const u = this.claim(id);
    if (u.received !== u.bytes) {
      this.release(u);
      throw new HutchError("invalid", `import ${id} has ${u.received} of its ${u.bytes} bytes`, `send the rest from byte ${u.received}`, {
        received: u.received,
      });
    }
    clearTimeout(u.idle);
    this.uploads.delete(id);
    return async (report, signal) => {
      // A client gone mid-install stops it at its next report; finish removes the staging either way.
      const checked: OpReport = (p) => {
        if (signal.aborted) throw signal.reason;
        report(p);
      };
      return { manifest: await u.pending.finish(checked) };
    };
  }

  /** Drops an upload and its staging (the client gave up). */
  async abort(id: string): Promise<void> {
    const u = this.uploads.get(id);
    if (!u) throw this.missing(id);
    this.uploads.delete(id);
    clearTimeout(u.idle);
    await u.pending.abort();
  }

  private claim(id: string): Upload {
    const u = this.uploads.get(id);
    if (!u) throw this.missing(id);
    if (u.busy) throw new HutchError("conflict", `import ${id} is receiving a chunk already`, "send one chunk at a time");
    u.busy = true;
    clearTimeout(u.idle);
    return u;
  }

  private release(u: Upload): void {
    u.busy = false;
    if (this.uploads.get(u.id) === u) u.idle = this.idleTimer(u.id);
  }

  /** The upload is over: dropped with its staging, and the error passed on. */
  private fail(u: Upload, err: unknown): unknown {
    this.uploads.delete(u.id);
    void u.pending.abort();
    return err;
  }

  private idleTimer(id: string): ReturnType<typeof setTimeout> {
    const t = setTimeout(() => void this.abort(id).catch(() => undefined), this.idleMs);
    t.unref?.();
    return t;
  }

  private missing(id: string): HutchError {
    return new HutchError("not_found", `no image import ${id} under way (it finished, failed or sat idle)`, again);
  }

  private state(u: Upload): ImageUpload {
    return { id: u.id, received: u.received, bytes: u.bytes, chunkBytes: IMAGE_LIMITS.chunkBytes };
  }
}
