// `hutch image import FILE` from wherever the CLI runs: the archive's bytes
// go to the daemon (this home's, or a --remote's) in chunks, in order, and
// the daemon installs them with an operation (shared/src/images.ts). This side
// only reads the file and sends it; the daemon checks everything. A failure,
// or Ctrl-C, drops the upload, and the daemon removes what it received.
import { statSync } from "node:fs";
import { check, firstError, HutchError, ImageImportResult, ImageUpload, type OpProgress } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";
import { runOp, type OpHandlers } from "./ops.ts";

export interface ImportArchive {
  file: string;
  name?: string;
  force: boolean;
}

/** How often the upload reports its counts. */
const COUNTS_EVERY_MS = 250;

function checked(value: unknown, what: string): ImageUpload {
  if (check(ImageUpload, value)) return value;
  throw new HutchError(
    "failed",
    `the daemon answered ${what} with a malformed upload: ${firstError(ImageUpload, value)}`,
    "the daemon and this CLI may be different builds: restart the daemon",
  );
}

export async function importArchive(d: DaemonClient, a: ImportArchive, h: OpHandlers = {}): Promise<ImageImportResult> {
  let bytes: number;
  try {
    const st = statSync(a.file);
    if (!st.isFile()) throw new Error("not a file");
    bytes = st.size;
  } catch {
    throw new HutchError("not_found", `no file ${a.file}`, "name a .tar of an image directory: hutch image import FILE");
  }
  if (bytes === 0) throw new HutchError("invalid", `${a.file} is empty`, "name a .tar of an image directory: hutch image import FILE");
  const up = checked(
    await d.request("POST", "/v1/images/imports", {
      bytes,
      force: a.force,
      file: a.file.slice(-255),
      ...(a.name !== undefined ? { name: a.name } : {}),
    }),
    "the import's start",
  );
  const path = `/v1/images/imports/${up.id}`;
  const drop = () => d.request("DELETE", path).catch(() => undefined);
  const interrupted = () => void drop().finally(() => process.exit(130));
  process.once("SIGINT", interrupted);
  try {
    const file = Bun.file(a.file);
    const t0 = performance.now();
    let last = 0;
    const counts = (sent: number): OpProgress => {
      const elapsedMs = Math.round(performance.now() - t0);
      const rate = elapsedMs > 0 ? Math.round((sent * 1000) / elapsedMs) : 0;
      return {
        type: "counts",
        phase: "upload",
        files: 0,
        bytes: sent,
        bytesTotal: bytes,
        rate,
        elapsedMs,
        ...(rate > 0 ? { etaMs: Math.round(((bytes - sent) * 1000) / rate) } : {}),
      };
    };
    for (let offset = 0; offset < bytes; ) {
      const end = Math.min(bytes, offset + up.chunkBytes);
      let res: Response;
      try {
        res = await d.transport.fetch(`${path}?offset=${offset}`, {
          method: "PATCH",
          headers: { ...d.headers, "content-type": "application/octet-stream" },
          body: file.slice(offset, end),
        });
      } catch (err) {
        throw new HutchError("unavailable", `lost the daemon: ${(err as Error).message}`, `import again: hutch image import ${a.file}`);
      }
      if (!res.ok) throw HutchError.fromBody(await res.json().catch(() => undefined), res.status);
      offset = checked(await res.json(), "a chunk").received;
      if (offset < end)
        throw new HutchError("failed", `the daemon kept ${offset} of ${end} bytes`, "see the daemon log; then import again");
      if (performance.now() - last >= COUNTS_EVERY_MS || offset === bytes) {
        last = performance.now();
        const line = counts(offset);
        h.line?.(line);
        h.progress?.(line);
      }
    }
    return await runOp(d, `${path}/install`, {}, ImageImportResult, h);
  } catch (err) {
    await drop();
    throw err;
  } finally {
    process.off("SIGINT", interrupted);
  }
}
