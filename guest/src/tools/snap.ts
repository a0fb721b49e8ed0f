// snap.out: a running box's side of a snapshot. The guest walks a root,
// cuts its files with the store's chunker (gear table and sizes given for
// this save) and sends entries and chunks as records (shared/src/chunk/
// records.ts); a chunk whose digest the host offered, or that this walk sent
// already, is named instead of sent. The digest key is this box's own, so
// the offer only ever tells the box about chunks it sent before. The host
// trusts none of it: it recomputes every id and checks every record.
import { type BigIntStats, constants } from "node:fs";
import { lstat, open, readdir, readlink, stat } from "node:fs/promises";
import { createHmac } from "node:crypto";
import { join } from "node:path";
import {
  Chan,
  Chunker,
  DIGEST_BYTES,
  dataRecord,
  entryRecord,
  haveRecord,
  IgnoreRules,
  Ignorer,
  type MuxStream,
  type SnapEntry,
  type SnapOutResult,
} from "@hutch/shared/wire";
import { readRuleFile } from "@hutch/shared/node";
import { PathError } from "../paths.ts";
import { ToolError, type Req } from "./base.ts";
import type { ToolContext } from "./context.ts";
import { takeFrames } from "./inbox.ts";
import { readUserXattrs } from "./fsx.ts";

const READ_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);
/** Small records are gathered into writes of about this size. */
const BATCH = 128 * 1024;
/** Hard-linked inodes remembered per walk (beyond it a link travels as another copy). */
const MAX_LINKS = 100_000;

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Records onto chan 1: small ones batched, chunk bytes written as they are. */
class Out {
  private parts: Uint8Array[] = [];
  private size = 0;
  bytes = 0;

  constructor(private readonly stream: MuxStream) {}

  /** `large`: a chunk's bytes, written as they are after what is gathered (not copied into a batch). */
  async add(piece: Uint8Array, large = false): Promise<void> {
    if (large && piece.length >= BATCH) {
      await this.flush();
      this.bytes += piece.length;
      if (!(await this.stream.write(Chan.stdout, piece))) throw new Closed();
      return;
    }
    this.parts.push(piece);
    this.size += piece.length;
    if (this.size >= BATCH) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.size === 0) return;
    const one = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    this.bytes += one.length;
    if (!(await this.stream.write(Chan.stdout, one))) throw new Closed();
  }
}

class Closed extends Error {}

/** Takes the offered digests from chan 0 (exactly `count` of them, then eof). */
function offeredDigests(stream: MuxStream, count: number): Promise<Set<string>> {
  const buf = new Uint8Array(count * DIGEST_BYTES);
  let got = 0;
  return new Promise((resolve, reject) => {
    takeFrames(
      stream,
      {
        data: (chan, bytes) => {
          if (chan !== Chan.stdin) return;
          if (got + bytes.length > buf.length) return reject(new ToolError("invalid", `more than ${count} offered digests`));
          buf.set(bytes, got);
          got += bytes.length;
        },
        eof: (chan) => {
          if (chan !== Chan.stdin) return;
          if (got !== buf.length) return reject(new ToolError("invalid", `${got} bytes of offered digests, expected ${buf.length}`));
          const set = new Set<string>();
          for (let off = 0; off < got; off += DIGEST_BYTES) set.add(Buffer.from(buf.subarray(off, off + DIGEST_BYTES)).toString("hex"));
          resolve(set);
        },
        close: () => reject(new Closed()),
      },
      true,
    );
  });
}

export async function snapOut(stream: MuxStream, req: Req<"snap.out">, ctx: ToolContext): Promise<void> {
  const offered = offeredDigests(stream, req.offered);
  const root = await ctx.paths.resolve(req.path);
  const rootSt = await stat(root).catch(() => undefined);
  if (!rootSt) throw new PathError("not_found", `${req.path}: no such file or directory`);
  if (!rootSt.isDirectory()) throw new PathError("invalid", `${req.path} is not a directory`);
  const gear = new Uint32Array(256);
  const g = Buffer.from(req.gear, "base64");
  if (g.length !== 1024) throw new ToolError("invalid", "gear: expected 1024 bytes");
  for (let i = 0; i < 256; i++) gear[i] = g.readUInt32LE(i * 4);
  let chunker: Chunker;
  try {
    chunker = new Chunker(req.chunk, gear);
  } catch (err) {
    throw new ToolError("invalid", `chunk: ${(err as Error).message}`);
  }
  const key = Buffer.from(req.digestKey, "base64");
  let have: Set<string>;
  try {
    have = await offered;
  } catch (err) {
    if (err instanceof Closed) return;
    throw err;
  }
  const walk = new Walk(stream, chunker, key, have, req);
  try {
    await walk.run(root);
  } catch (err) {
    if (err instanceof Closed) return;
    throw err;
  }
  stream.eof(Chan.stdout);
  stream.msg({ type: "result", value: walk.result() satisfies SnapOutResult });
  stream.close();
}

class Walk {
  private readonly out: Out;
  private entries = 0;
  private chunksSent = 0;
  private chunksNamed = 0;
  /** dev:ino → the path of a file's first link. */
  private readonly links = new Map<string, string[]>();
  private readonly ignore?: Ignorer;

  constructor(
    private readonly stream: MuxStream,
    private readonly chunker: Chunker,
    private readonly key: Uint8Array,
    private readonly have: Set<string>,
    private readonly req: Req<"snap.out">,
  ) {
    this.out = new Out(stream);
    if (req.exclude || req.ignoreFile) this.ignore = new Ignorer([IgnoreRules.parse(req.exclude ?? [])]);
  }

  result(): SnapOutResult {
    return { entries: this.entries, bytesSent: this.out.bytes, chunksSent: this.chunksSent, chunksNamed: this.chunksNamed };
  }

  async run(root: string): Promise<void> {
    // An explicit stack rather than recursion: depth is set by the tree, not by us.
    const stack: { abs: string; path: string[] }[] = [{ abs: root, path: [] }];
    for (let next = stack.pop(); next; next = stack.pop()) {
      if (this.stream.closed) throw new Closed();
      const { abs, path } = next;
      let st: BigIntStats;
      try {
        st = await lstat(abs, { bigint: true });
      } catch (err) {
        // Gone since its directory was listed: a running box changes under the walk.
        if ((err as NodeJS.ErrnoException).code === "ENOENT" && path.length > 0) continue;
        throw err;
      }
      const base = { path, mode: Number(st.mode & 0o7777n), mtime: String(st.mtimeNs), uid: Number(st.uid), gid: Number(st.gid) };
      const xattrs = this.xattrs(abs);
      if (st.isDirectory()) {
        await this.entry({ ...base, type: "dir", ...xattrs });
        let children: string[];
        try {
          children = (await readdir(abs)).sort(byName);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "ENOENT" && path.length > 0) children = [];
          else throw err;
        }
        const rel = path.join("/");
        if (this.ignore && this.req.ignoreFile && children.includes(this.req.ignoreFile)) {
          const text = await readRuleFile(join(abs, this.req.ignoreFile));
          if (text !== undefined) this.ignore.add(IgnoreRules.parse(text, rel));
        }
        for (let i = children.length - 1; i >= 0; i--) {
          const child = children[i]!;
          if (this.ignore) {
            const childRel = rel === "" ? child : `${rel}/${child}`;
            const asFile = this.ignore.ignored(childRel, false);
            const asDir = this.ignore.ignored(childRel, true);
            const isDir = asFile !== asDir && (await lstat(join(abs, child)).catch(() => undefined))?.isDirectory() === true;
            if (isDir ? asDir : asFile) continue;
          }
          stack.push({ abs: join(abs, child), path: [...path, child] });
        }
      } else if (st.isSymbolicLink()) {
        const target = await readlink(abs).catch(() => "");
        if (target === "") continue;
        await this.entry({ ...base, type: "symlink", target, ...xattrs });
      } else if (st.isFile()) {
        const linkKey = st.nlink > 1n ? `${st.dev}:${st.ino}` : undefined;
        const first = linkKey ? this.links.get(linkKey) : undefined;
        if (first) {
          await this.entry({ ...base, type: "hardlink", linkOf: first, ...xattrs });
          continue;
        }
        await this.file(abs, st, { ...base, type: "file", ...xattrs });
        if (linkKey && this.links.size < MAX_LINKS) this.links.set(linkKey, path);
      }
      // Sockets, FIFOs and devices are left out, as tar.out does.
    }
    await this.out.flush();
  }

  private xattrs(abs: string): { xattrs?: [string, string][] } {
    const x = readUserXattrs(abs);
    if (x.length === 0) return {};
    return { xattrs: x.map(([n, v]) => [n, Buffer.from(v).toString("base64")]) };
  }

  private async entry(e: SnapEntry): Promise<void> {
    this.entries++;
    await this.out.add(entryRecord(e));
  }

  /** The entry, then its chunks: exactly the size it was stat'ed at (a file that shrank meanwhile fails the walk, as in tar.out). */
  private async file(abs: string, st: BigIntStats, e: SnapEntry): Promise<void> {
    const fh = await open(abs, READ_FLAGS);
    try {
      const fst = await fh.stat({ bigint: true });
      if (!fst.isFile() || fst.ino !== st.ino) throw new ToolError("failed", `${abs}: replaced while being read`);
      const size = Number(st.size);
      await this.entry({ ...e, size });
      const max = this.chunker.params.maxSize;
      const blockSize = Math.min(size, 2 * max);
      let buf = new Uint8Array(blockSize);
      let start = 0;
      let end = 0;
      let pos = 0;
      while (pos < size || start < end) {
        while (end < buf.length && pos < size) {
          const { bytesRead } = await fh.read(buf, end, Math.min(buf.length - end, size - pos), pos);
          if (bytesRead === 0) throw new ToolError("failed", `${abs}: shrank while being read`);
          end += bytesRead;
          pos += bytesRead;
        }
        const final = pos === size;
        while (start < end) {
          const cut = this.chunker.cut(buf, start, end, final);
          if (cut < 0) break;
          await this.chunk(buf.subarray(start, cut));
          start = cut;
        }
        if (final) break;
        // The undecided tail moves to a fresh block: the chunks sent from this one may still be queued.
        const next = new Uint8Array(blockSize);
        next.set(buf.subarray(start, end));
        end -= start;
        start = 0;
        buf = next;
      }
    } finally {
      await fh.close();
    }
  }

  private async chunk(bytes: Uint8Array): Promise<void> {
    const digest = createHmac("sha256", this.key).update(bytes).digest();
    const hexd = digest.toString("hex");
    if (this.have.has(hexd)) {
      this.chunksNamed++;
      await this.out.add(haveRecord(digest, bytes.length));
      return;
    }
    this.have.add(hexd);
    this.chunksSent++;
    const [head, body] = dataRecord(bytes);
    await this.out.add(head);
    await this.out.add(body, true);
  }
}
