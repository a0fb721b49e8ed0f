// Writes parsed entries into a private staging directory, then moves them into
// the destination. Archives come out of untrusted boxes, so nothing here ever
// follows a symlink: parents are checked with lstat, files are opened with
// O_EXCL|O_NOFOLLOW, and links are created, never resolved.
import { constants } from "node:fs";
import {
  type FileHandle,
  chmod,
  lchown,
  lstat,
  link,
  lutimes,
  mkdir,
  mkdtemp,
  open,
  readdir,
  rename,
  rm,
  symlink,
  unlink,
  utimes,
} from "node:fs/promises";
import { join } from "node:path";
import { TarError, fsFailure } from "../../src/tar/error.ts";
import type { Entry, EntrySink } from "../../src/tar/parse.ts";

export const STAGING_PREFIX = ".hutch-unpack-";

const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0);

type Kind = "dir" | "file" | "symlink" | "other";

async function kindOf(path: string): Promise<Kind | undefined> {
  try {
    const st = await lstat(path);
    if (st.isDirectory()) return "dir";
    if (st.isSymbolicLink()) return "symlink";
    return st.isFile() ? "file" : "other";
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Runs one filesystem step, reporting a failure against the entry it was for. */
async function attempt<T>(rel: string, action: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw fsFailure(rel, action, err);
  }
}

/** An entry's mtime in seconds, with the fraction an exact (pax) time carries: node's utimes takes float seconds (~µs). */
function seconds(e: Entry): number {
  return e.mtimeNs === undefined ? e.mtime : Number(e.mtimeNs) / 1e9;
}

interface DirMeta {
  mode: number;
  mtime: number;
  entry: Entry;
}

/**
 * What node:fs cannot do and a faithful snapshot restore needs, given by
 * the caller's libc: mtimes to the nanosecond and extended attributes, on a
 * path, never through a symlink. Used only for entries with exact metadata.
 */
export interface ExactFs {
  setTimes(path: string, ns: bigint): void;
  /** False when the filesystem or the namespace refuses it (the restore goes on). */
  setXattr(path: string, name: string, value: Uint8Array): boolean;
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export class Extractor implements EntrySink {
  private staging: string | undefined;
  /**
   * Relative paths verified (by lstat) or created as real directories. Sound as a
   * cache because extraction never removes or replaces a directory.
   */
  private dirs = new Set<string>();
  /** Metadata of directory entries, applied last: adding children changes mtime. */
  private dirMeta = new Map<string, DirMeta>();
  private file: { fh: FileHandle; entry: Entry; rel: string } | undefined;
  /** Files this archive wrote (relative paths): the only ones a hard link entry may name. */
  private readonly written = new Set<string>();

  /**
   * @param modeMask the permission bits an entry may keep (never setuid, setgid or sticky)
   * @param owner who owns every entry made (none: whoever extracts)
   */
  constructor(
    private readonly destDir: string,
    private readonly modeMask = 0o777,
    private readonly owner?: { uid: number; gid: number },
    private readonly exact?: ExactFs,
  ) {}

  /** xattrs, then the exact mtime (last: nothing after it may touch the entry's times). */
  private applyExact(rel: string, abs: string, e: Entry): void {
    const x = this.exact;
    if (!x) return;
    for (const [n, v] of e.xattrs ?? []) x.setXattr(abs, n, fromBase64(v));
    if (e.mtimeNs !== undefined) {
      try {
        x.setTimes(abs, e.mtimeNs);
      } catch (err) {
        throw fsFailure(rel, "set exact mtime", err);
      }
    }
  }

  /** Gives a new entry to the owner, never through a symlink. */
  private async own(rel: string, abs: string): Promise<void> {
    const o = this.owner;
    if (o) await attempt(rel, "chown", () => lchown(abs, o.uid, o.gid));
  }

  async begin(entry: Entry): Promise<void> {
    const rel = entry.parts.join("/");
    const staging = await this.stage(rel);
    await this.ensureParents(staging, entry.parts, rel);
    const abs = join(staging, rel);
    const existing = await attempt(rel, "lstat", () => kindOf(abs));
    switch (entry.type) {
      case "dir":
        // Owner-only until commit, when the archived mode is applied: a read-only
        // directory must still accept its children during extraction.
        if (existing === undefined) {
          await attempt(rel, "mkdir", () => mkdir(abs, 0o700));
          await this.own(rel, abs);
        } else if (existing !== "dir") throw new TarError(`entry "${rel}": directory would replace an existing ${existing}`);
        this.dirs.add(rel);
        this.dirMeta.set(rel, { mode: entry.mode & this.modeMask & 0o777, mtime: seconds(entry), entry });
        return;
      case "symlink":
        if (existing !== undefined) throw new TarError(`entry "${rel}": symlink would replace an existing ${existing}`);
        await attempt(rel, "symlink", () => symlink(entry.linkpath, abs));
        await this.own(rel, abs);
        await attempt(rel, "set symlink mtime", () => lutimes(abs, seconds(entry), seconds(entry)));
        this.applyExact(rel, abs, entry);
        return;
      case "hardlink": {
        // Only with UnpackOptions.links, and only to a file this same archive wrote: never to anything already there.
        const target = entry.link!.join("/");
        if (!this.written.has(target)) throw new TarError(`entry "${rel}": hard link to "${target}", which this archive did not write`);
        if (existing !== undefined) throw new TarError(`entry "${rel}": hard link would replace an existing ${existing}`);
        await attempt(rel, "link", () => link(join(staging, target), abs));
        return;
      }
      case "file":
        // A repeated file entry replaces the earlier one (tar's "last wins"); a
        // symlink or directory in its place is refused, never written through.
        if (existing === "file") await attempt(rel, "unlink", () => unlink(abs));
        else if (existing !== undefined) throw new TarError(`entry "${rel}": file would replace an existing ${existing}`);
        this.file = { fh: await attempt(rel, "create", () => open(abs, CREATE_FLAGS, 0o600)), entry, rel };
        if (this.owner) await attempt(rel, "chown", () => this.file!.fh.chown(this.owner!.uid, this.owner!.gid));
        return;
    }
  }

  async data(chunk: Uint8Array): Promise<void> {
    const f = this.file;
    if (!f) throw new TarError("file data outside a file entry");
    try {
      let off = 0;
      while (off < chunk.length) {
        const { bytesWritten } = await f.fh.write(chunk, off, chunk.length - off);
        off += bytesWritten;
      }
    } catch (err) {
      throw fsFailure(f.rel, "write", err);
    }
  }

  async finish(): Promise<void> {
    const f = this.file;
    if (!f) return;
    this.file = undefined;
    try {
      // Permission bits only: setuid/setgid/sticky from a box are dropped.
      await f.fh.chmod(f.entry.mode & this.modeMask & 0o777);
      await f.fh.utimes(seconds(f.entry), seconds(f.entry));
      this.written.add(f.rel);
    } catch (err) {
      throw fsFailure(f.rel, "set metadata", err);
    } finally {
      await f.fh.close();
    }
    if (this.exact) this.applyExact(f.rel, join(this.staging!, f.rel), f.entry);
  }

  /**
   * Moves staged top-level entries into destDir. Conflicts are found in a first
   * pass so a type mismatch refuses the copy before anything is moved.
   */
  async commit(): Promise<void> {
    const staging = this.staging;
    if (staging === undefined) return;
    const tops = await readdir(staging);
    const merged = new Set<string>();
    for (const name of tops) await this.plan(staging, name, merged);
    for (const name of tops) await this.move(staging, name, merged);
    await this.applyDirMeta(merged);
    await rm(staging, { recursive: true, force: true });
    this.staging = undefined;
  }

  /** Removes the staging directory and everything in it; safe to call repeatedly. */
  async cleanup(): Promise<void> {
    const f = this.file;
    this.file = undefined;
    if (f) await f.fh.close().catch(() => undefined);
    const staging = this.staging;
    this.staging = undefined;
    // rm does not follow symlinks, so staged links to outside paths are just unlinked.
    if (staging !== undefined) await rm(staging, { recursive: true, force: true });
  }

  private async stage(rel: string): Promise<string> {
    if (this.staging !== undefined) return this.staging;
    // Inside destDir so the final moves are same-filesystem renames.
    const staging = await attempt(rel, `create staging directory in "${this.destDir}"`, () => mkdtemp(join(this.destDir, STAGING_PREFIX)));
    this.staging = staging;
    return staging;
  }

  /** Every parent must be a real directory; missing ones are created, symlinks refused. */
  private async ensureParents(staging: string, parts: string[], rel: string): Promise<void> {
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join("/");
      if (this.dirs.has(parent)) continue;
      const abs = join(staging, parent);
      const kind = await attempt(rel, "lstat", () => kindOf(abs));
      if (kind === undefined) {
        await attempt(rel, "mkdir", () => mkdir(abs));
        await this.own(parent, abs);
      } else if (kind !== "dir") {
        throw new TarError(`entry "${rel}": parent "${parent}" is a ${kind}, not a directory; refusing to write through it`);
      }
      this.dirs.add(parent);
    }
  }

  private async plan(staging: string, rel: string, merged: Set<string>): Promise<void> {
    const src = join(staging, rel);
    const dst = join(this.destDir, rel);
    const [from, to] = await Promise.all([kindOf(src), kindOf(dst)]);
    if (to === undefined) return;
    if (from === "dir" && to === "dir") {
      merged.add(rel);
      for (const child of await readdir(src)) await this.plan(staging, `${rel}/${child}`, merged);
      return;
    }
    if (from !== to || from === "dir") {
      throw new TarError(`entry "${rel}": cannot replace existing ${to} "${dst}" with a ${from}`);
    }
  }

  private async move(staging: string, rel: string, merged: Set<string>): Promise<void> {
    const src = join(staging, rel);
    const dst = join(this.destDir, rel);
    if (!merged.has(rel)) {
      await attempt(rel, `move into "${this.destDir}"`, () => rename(src, dst));
      return;
    }
    for (const child of await readdir(src)) await this.move(staging, `${rel}/${child}`, merged);
  }

  /**
   * Deepest first, so setting a parent's mtime is the last change to it. Existing
   * directories we merged into keep their own mode and mtime: an archive from a
   * box must not be able to chmod the user's directories.
   */
  private async applyDirMeta(merged: Set<string>): Promise<void> {
    const depth = (rel: string): number => rel.split("/").length;
    const order = [...this.dirMeta.keys()].filter((rel) => !merged.has(rel)).sort((a, b) => depth(b) - depth(a));
    for (const rel of order) {
      const meta = this.dirMeta.get(rel);
      const abs = join(this.destDir, rel);
      if (!meta || (await kindOf(abs)) !== "dir") continue;
      await attempt(rel, "set directory metadata", async () => {
        await chmod(abs, meta.mode);
        await utimes(abs, meta.mtime, meta.mtime);
      });
      this.applyExact(rel, abs, meta.entry);
    }
  }
}
