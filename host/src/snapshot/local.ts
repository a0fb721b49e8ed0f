// The local directory backend. Writes go to tmp/, are fsynced, then
// link(2)ed to their name (which fails rather than replaces, unlike rename)
// and the directory is fsynced; so an object is either whole under its name
// or absent. Packs are sharded by their first two hex digits, as restic does,
// to keep directories small. The fsyncs run on the thread pool: the thread
// that saves goes on reading and sealing while a pack and its directory
// reach the disk (each took 5-20 ms here, and far longer on a busy disk).
import {
  closeSync,
  copyFileSync,
  fsync,
  linkSync,
  mkdirSync,
  openSync,
  readSync,
  readdirSync,
  statSync,
  fstatSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { type Backend, type ObjectInfo, type ObjectKind, type Range, checkName, stagingFile, sweepStaging } from "./backend.ts";
import { StoreError, corrupt } from "./errors.ts";

const KINDS: ObjectKind[] = ["packs", "index", "snapshots", "marks", "saves", "locks"];
/** Open pack files kept for ranged reads (a restore reads one pack's blobs in turn). */
const MAX_OPEN = 16;

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException)?.code;
}

/** fsync(2) on the thread pool. */
function syncFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
}

/** fsync(2) of a file or directory by path, on the thread pool. */
async function syncPath(path: string): Promise<void> {
  const fd = openSync(path, "r");
  try {
    await syncFd(fd);
  } finally {
    closeSync(fd);
  }
}

export class LocalBackend implements Backend {
  private readonly fds = new Map<string, number>();

  constructor(readonly location: string) {
    mkdirSync(location, { recursive: true, mode: 0o700 });
    for (const k of [...KINDS, "tmp"]) mkdirSync(join(location, k), { recursive: true, mode: 0o700 });
    sweepStaging(this.stagingDir());
  }

  private path(kind: ObjectKind, name: string): string {
    checkName(kind, name);
    if (kind === "config") return join(this.location, "config");
    if (kind === "packs") return join(this.location, "packs", name.slice(0, 2), name);
    return join(this.location, kind, name);
  }

  stagingDir(): string {
    return join(this.location, "tmp");
  }

  async *list(kind: ObjectKind): AsyncIterable<ObjectInfo> {
    if (kind === "config") {
      const info = this.info(join(this.location, "config"), "config");
      if (info) yield info;
      return;
    }
    const root = join(this.location, kind);
    const dirs =
      kind === "packs"
        ? readdirSync(root)
            .filter((d) => /^[0-9a-f]{2}$/.test(d))
            .map((d) => join(root, d))
        : [root];
    for (const dir of dirs) {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch (err) {
        if (errno(err) === "ENOENT") continue;
        throw err;
      }
      for (const name of names) {
        try {
          checkName(kind, name);
        } catch {
          continue;
        }
        const info = this.info(join(dir, name), name);
        if (info) yield info;
      }
    }
  }

  private info(path: string, name: string): ObjectInfo | undefined {
    try {
      const st = statSync(path);
      return st.isFile() ? { name, size: st.size, mtimeMs: st.mtimeMs } : undefined;
    } catch (err) {
      if (errno(err) === "ENOENT") return undefined;
      throw err;
    }
  }

  private fd(kind: ObjectKind, name: string, path: string): number {
    const key = `${kind}/${name}`;
    const cached = this.fds.get(key);
    if (cached !== undefined) {
      this.fds.delete(key);
      this.fds.set(key, cached);
      return cached;
    }
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch (err) {
      if (errno(err) === "ENOENT")
        throw new StoreError(
          "not_found",
          `${key} is missing from the store at ${this.location}`,
          "run check to see what else is missing",
          key,
        );
      throw err;
    }
    if (kind === "packs") {
      this.fds.set(key, fd);
      if (this.fds.size > MAX_OPEN) {
        const [oldKey, oldFd] = this.fds.entries().next().value as [string, number];
        this.fds.delete(oldKey);
        closeSync(oldFd);
      }
    }
    return fd;
  }

  async get(kind: ObjectKind, name: string, range?: Range): Promise<Uint8Array> {
    const path = this.path(kind, name);
    const fd = this.fd(kind, name, path);
    try {
      const offset = range?.offset ?? 0;
      // The open descriptor, not the path: an object removed after it was opened (a save finishing while a prune
      // lists the registrations) is still read whole, instead of failing the caller with ENOENT.
      const length = range ? range.length : fstatSync(fd).size;
      const out = new Uint8Array(length);
      let got = 0;
      while (got < length) {
        const n = readSync(fd, out, got, length - got, offset + got);
        if (n === 0) break;
        got += n;
      }
      if (got < length)
        throw corrupt(`${kind}/${name}`, `is truncated (wanted bytes ${offset}..${offset + length}, it ends at ${offset + got})`);
      return out;
    } finally {
      if (kind !== "packs") closeSync(fd);
    }
  }

  async put(kind: ObjectKind, name: string, data: Uint8Array): Promise<boolean> {
    checkName(kind, name);
    const tmp = stagingFile(this);
    const fd = openSync(tmp, "wx", 0o600);
    try {
      let off = 0;
      while (off < data.length) off += writeSync(fd, data, off, data.length - off);
      await syncFd(fd);
    } finally {
      closeSync(fd);
    }
    return this.link(kind, name, tmp);
  }

  async putFile(kind: ObjectKind, name: string, path: string): Promise<boolean> {
    checkName(kind, name);
    if (dirname(path) === this.stagingDir()) {
      await syncPath(path);
      return this.link(kind, name, path);
    }
    const tmp = stagingFile(this);
    copyFileSync(path, tmp);
    await syncPath(tmp);
    unlinkSync(path);
    return this.link(kind, name, tmp);
  }

  private async link(kind: ObjectKind, name: string, tmp: string): Promise<boolean> {
    const dest = this.path(kind, name);
    try {
      try {
        linkSync(tmp, dest);
      } catch (err) {
        if (errno(err) === "EEXIST") return false;
        if (errno(err) !== "ENOENT" || kind !== "packs") throw err;
        mkdirSync(dirname(dest), { recursive: true, mode: 0o700 });
        await syncPath(join(this.location, "packs"));
        // Another put of the same name may have made the shard and won while we waited.
        try {
          linkSync(tmp, dest);
        } catch (again) {
          if (errno(again) === "EEXIST") return false;
          throw again;
        }
      }
      await syncPath(dirname(dest));
      return true;
    } finally {
      unlinkSync(tmp);
    }
  }

  async delete(kind: ObjectKind, name: string): Promise<void> {
    const path = this.path(kind, name);
    const key = `${kind}/${name}`;
    const fd = this.fds.get(key);
    if (fd !== undefined) {
      this.fds.delete(key);
      closeSync(fd);
    }
    try {
      unlinkSync(path);
    } catch (err) {
      if (errno(err) === "ENOENT") return;
      throw err;
    }
    await syncPath(dirname(path));
  }

  close(): void {
    for (const fd of this.fds.values()) closeSync(fd);
    this.fds.clear();
  }
}
