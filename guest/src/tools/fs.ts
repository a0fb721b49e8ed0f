// File tools. Every path goes through PathPolicy first; what it returns is a
// real path inside the roots.
import { constants } from "node:fs";
import { lstat, open, readdir, readlink, rename, stat, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { Stats } from "node:fs";
import { Chan, FS_LIST_MAX, MAX_PAYLOAD, type FsListResult, type FileStat, type FsSizeResult, type MuxStream } from "@hutch/shared/wire";
import { PathError } from "../paths.ts";
import { toStreamError, type Req } from "./base.ts";
import type { ToolContext } from "./context.ts";
import { takeFrames } from "./inbox.ts";

function fileType(st: Stats): FileStat["type"] {
  if (st.isFile()) return "file";
  if (st.isDirectory()) return "dir";
  if (st.isSymbolicLink()) return "symlink";
  return "other";
}

async function describe(path: string, st: Stats): Promise<FileStat> {
  const out: FileStat = { path, type: fileType(st), size: st.size, mode: st.mode & 0o7777, mtimeMs: st.mtimeMs };
  if (st.isSymbolicLink()) out.target = await readlink(path).catch(() => "");
  return out;
}

/** fs.stat describes what the path resolves to: symlinks on it are followed, so type is never "symlink". */
export async function fsStat(stream: MuxStream, req: Req<"fs.stat">, ctx: ToolContext): Promise<void> {
  const path = await ctx.paths.resolve(req.path);
  const st = await stat(path).catch((err: unknown) => {
    throw toPathError(err, req.path);
  });
  result(stream, await describe(path, st));
}

/** fs.list lists entries without following them: a symlink is reported as one, with its target. */
export async function fsList(stream: MuxStream, req: Req<"fs.list">, ctx: ToolContext): Promise<void> {
  const dir = await ctx.paths.resolve(req.path);
  const names = await readdir(dir).catch((err: unknown) => {
    throw toPathError(err, req.path);
  });
  if (names.length > FS_LIST_MAX)
    throw new PathError("failed", `${req.path} has ${names.length} entries, more than the ${FS_LIST_MAX} fs.list returns`);
  names.sort();
  const entries: FsListResult = [];
  for (const name of names) {
    const path = join(dir, name);
    // An entry removed while we list is simply not listed.
    const st = await lstat(path).catch(() => undefined);
    if (st) entries.push({ name, ...(await describe(path, st)) });
  }
  result(stream, entries);
}

export async function fsRead(stream: MuxStream, req: Req<"fs.read">, ctx: ToolContext): Promise<void> {
  const path = await ctx.paths.resolve(req.path);
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW).catch((err: unknown) => {
    throw toPathError(err, req.path);
  });
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new PathError("invalid", `${req.path} is not a regular file`);
    // One buffer for the whole file: stream.write has copied the bytes into
    // a frame by the time it resolves.
    const buf = new Uint8Array(MAX_PAYLOAD);
    let size = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      if (!(await stream.write(Chan.stdout, buf.subarray(0, bytesRead)))) return;
      size += bytesRead;
    }
    stream.eof(Chan.stdout);
    result(stream, { size });
  } finally {
    await fh.close();
  }
}

/**
 * fs.write lands atomically: the content goes to a temporary file beside the
 * target, is fsynced, and renamed over it only after eof. A stream that ends
 * any other way removes the temporary file.
 */
export async function fsWrite(stream: MuxStream, req: Req<"fs.write">, ctx: ToolContext): Promise<void> {
  const path = await ctx.paths.resolve(req.path);
  const dir = dirname(path);
  const dirStat = await stat(dir).catch(() => undefined);
  if (!dirStat?.isDirectory()) throw new PathError("not_found", `${req.path}: directory ${dir} does not exist`);
  const existing = await stat(path).catch(() => undefined);
  if (existing?.isDirectory()) throw new PathError("invalid", `${req.path} is a directory`);
  if (stream.closed) return;

  // Hidden, unique, and short enough for NAME_MAX whatever the target's name.
  const tmp = join(dir, `.${basename(path).slice(0, 200)}.hutch-${crypto.randomUUID().slice(0, 8)}.tmp`);
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  const upload = new Upload(
    fh,
    (n) => stream.consumed(n),
    (err) => stream.close(toStreamError(err, req.path)),
  );
  let done = false;
  const finished = new Promise<boolean>((resolve) => {
    takeFrames(
      stream,
      {
        data: (chan, bytes) => {
          if (chan === Chan.stdin) upload.push(bytes);
        },
        eof: (chan) => {
          if (chan === Chan.stdin) resolve(true);
        },
        close: () => resolve(false),
      },
      false,
    );
  });
  try {
    const complete = await finished;
    await upload.idle();
    if (!complete || stream.closed) throw new Error("stream ended before eof");
    await fh.chmod(req.mode ?? (existing ? existing.mode & 0o7777 : 0o644));
    // A root guest (a VM's PID 1) writes for the box's user: the replaced file keeps its owner, a new one is the user's.
    const owner = ctx.config.boxUser ? (existing ?? ctx.config.boxUser) : null;
    if (owner) await fh.chown(owner.uid, owner.gid);
    await fh.sync();
    await fh.close();
    await rename(tmp, path);
    done = true;
    await syncDir(dir);
    result(stream, { size: upload.size });
  } catch (err) {
    await fh.close().catch(() => {});
    if (!done) await unlink(tmp).catch(() => {});
    if (!stream.closed) throw err;
    ctx.log.debug("fs.write abandoned", { stream: stream.id });
  }
}

/** Writes frames to the file in order, crediting each once it is on its way to disk. */
class Upload {
  size = 0;
  private chain: Promise<void> = Promise.resolve();
  private error: unknown;

  constructor(
    private readonly fh: FileHandle,
    private readonly credit: (n: number) => void,
    /** A failed write ends the stream at once: the host would otherwise wait for credit forever. */
    private readonly fail: (err: unknown) => void,
  ) {}

  push(bytes: Uint8Array): void {
    this.chain = this.chain.then(async () => {
      if (this.error) return;
      try {
        let off = 0;
        while (off < bytes.length) off += (await this.fh.write(bytes, off, bytes.length - off)).bytesWritten;
        this.size += bytes.length;
        this.credit(bytes.length);
      } catch (err) {
        this.error = err;
        this.fail(err);
      }
    });
  }

  async idle(): Promise<void> {
    await this.chain;
    if (this.error) throw this.error;
  }
}

/** Makes the rename durable; best effort, some filesystems refuse fsync on a directory. */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, constants.O_RDONLY).catch(() => undefined);
  await fh?.sync().catch(() => {});
  await fh?.close();
}

function toPathError(err: unknown, requested: string): PathError {
  const e = toStreamError(err, requested);
  return new PathError(e.code === "not_found" ? "not_found" : "failed", e.message);
}

function result(stream: MuxStream, value: FileStat | FsListResult | FsSizeResult): void {
  stream.msg({ type: "result", value });
  stream.close();
}
