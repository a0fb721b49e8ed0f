// Incremental tar parser: accepts bytes in any split and hands whole entries to
// a sink. Knows the format and the limits; knows nothing about the filesystem.
import { BLOCK, decodeHeader, isZeroBlock, parsePax, type RawHeader } from "./header.ts";
import { TarError } from "./error.ts";
import { joinBytes } from "../bytes.ts";
import { checkComponent, checkLinkTarget, entryParts } from "./names.ts";

export type EntryType = "file" | "dir" | "symlink" | "hardlink";

export interface Entry {
  /** Safe, normalised components (already renamed by `topName`). */
  parts: string[];
  type: EntryType;
  mode: number;
  mtime: number;
  size: number;
  linkpath: string;
  /** With Limits.meta: the exact mtime in ns (from a pax mtime with a fraction), and owners from pax uid/gid. */
  mtimeNs?: bigint;
  uid?: number;
  gid?: number;
  /** A hardlink's target: an earlier entry's safe components (renamed by `topName`). */
  link?: string[];
  /** With Limits.meta: extended attributes from `HUTCH.xattr.<name>` pax records, [name, base64 value], sorted by name. */
  xattrs?: [string, string][];
}

export interface EntrySink {
  begin(entry: Entry): Promise<void>;
  data(chunk: Uint8Array): Promise<void>;
  finish(): Promise<void>;
}

export interface Limits {
  topName?: string;
  maxBytes: number;
  maxEntries: number;
  /** Largest pax or GNU long-name body we buffer. */
  maxMeta: number;
  /**
   * Snapshot metadata: keep exact mtimes and owners, and pass hard links on
   * as "hardlink" entries naming an earlier path (for a sink that records
   * them; an extractor never sets this, since a link could name any path).
   */
  meta?: boolean;
}

/** Sparse-file keys: GNU tar writes the sparse map as the body, which we would store as content. */
const SPARSE_KEYS = ["GNU.sparse.major", "GNU.sparse.size", "GNU.sparse.realsize", "GNU.sparse.map"];
const PAX_KEYS: ReadonlySet<string> = new Set(["path", "linkpath", "size", "mtime", ...SPARSE_KEYS]);
const META_KEYS: ReadonlySet<string> = new Set([...PAX_KEYS, "uid", "gid"]);
/** Extended attributes ride in pax records of this prefix, base64 (pax values are UTF-8 text; xattr values are bytes). */
export const XATTR_PAX_PREFIX = "HUTCH.xattr.";
const XATTR_MAX = { count: 256, nameBytes: 255, valueChars: Math.ceil((64 * 1024) / 3) * 4 };
const isMetaKey = (k: string) => META_KEYS.has(k) || k.startsWith(XATTR_PAX_PREFIX);

/**
 * Refused type flags, with the reason. Hardlinks could point at any path already
 * extracted (or outside it, depending on the reader); devices and FIFOs have no
 * business crossing out of a box. Anything unlisted and unknown is refused too.
 */
const REFUSED: Record<string, string> = {
  "1": "hardlinks are not supported",
  "3": "character devices are not allowed",
  "4": "block devices are not allowed",
  "6": "FIFOs are not allowed",
};

type State =
  | { kind: "header" }
  | { kind: "meta"; flag: string; remaining: number; chunks: Uint8Array[] }
  | { kind: "data"; remaining: number; pad: number }
  | { kind: "skip"; remaining: number }
  | { kind: "done" };

export class TarParser {
  private state: State = { kind: "header" };
  private header = new Uint8Array(BLOCK);
  private headerFill = 0;
  /** Offset of the next byte, for locating damage in error messages. */
  private offset = 0;
  private pending = new Map<string, string>();
  private firstTop: string | undefined;
  private current = "";
  entries = 0;
  bytes = 0;
  private budget = 0;

  constructor(
    private readonly sink: EntrySink,
    private readonly limits: Limits,
  ) {
    if (limits.topName !== undefined) checkComponent(limits.topName, "topName");
  }

  async push(chunk: Uint8Array): Promise<void> {
    let off = 0;
    while (off < chunk.length) {
      const s = this.state;
      switch (s.kind) {
        case "done":
          // Trailing bytes after the end marker are record padding; GNU tar ignores them too.
          this.offset += chunk.length - off;
          return;
        case "header": {
          const n = Math.min(BLOCK - this.headerFill, chunk.length - off);
          this.header.set(chunk.subarray(off, off + n), this.headerFill);
          this.headerFill += n;
          off += n;
          this.offset += n;
          if (this.headerFill === BLOCK) {
            this.headerFill = 0;
            await this.onHeader();
          }
          break;
        }
        case "meta": {
          const n = Math.min(s.remaining, chunk.length - off);
          s.chunks.push(chunk.slice(off, off + n));
          s.remaining -= n;
          off += n;
          this.offset += n;
          if (s.remaining === 0) this.onMeta(s.flag, s.chunks);
          break;
        }
        case "data": {
          const n = Math.min(s.remaining, chunk.length - off);
          await this.sink.data(chunk.subarray(off, off + n));
          s.remaining -= n;
          off += n;
          this.offset += n;
          if (s.remaining === 0) await this.endData();
          break;
        }
        case "skip": {
          const n = Math.min(s.remaining, chunk.length - off);
          s.remaining -= n;
          off += n;
          this.offset += n;
          if (s.remaining === 0) this.state = { kind: "header" };
          break;
        }
      }
    }
  }

  /** Called at end of input: anything but a completed end marker is truncation. */
  finish(): void {
    const s = this.state;
    if (s.kind === "done") return;
    if (s.kind === "header" && this.headerFill === 0) {
      throw new TarError("archive truncated: end-of-archive marker missing");
    }
    const inside = s.kind === "data" ? ` inside entry "${this.current}"` : "";
    throw new TarError(`archive truncated${inside} at byte ${this.offset}`);
  }

  private where(): string {
    return `header at byte ${this.offset - BLOCK}`;
  }

  private async onHeader(): Promise<void> {
    // One zero block ends the archive; GNU tar writes two but stops at the first.
    if (isZeroBlock(this.header)) {
      this.state = { kind: "done" };
      return;
    }
    const h = decodeHeader(this.header, this.where());
    switch (h.typeflag) {
      case "x":
      case "g":
      case "L":
      case "K":
        if (h.size > this.limits.maxMeta) {
          throw new TarError(`${this.where()}: extended header of ${h.size} bytes exceeds ${this.limits.maxMeta}`);
        }
        this.state = { kind: "meta", flag: h.typeflag, remaining: h.size, chunks: [] };
        if (h.size === 0) this.onMeta(h.typeflag, []);
        return;
      default:
        await this.onEntry(h);
    }
  }

  private onMeta(flag: string, chunks: Uint8Array[]): void {
    const body = joinChunks(chunks);
    const size = body.length;
    this.state = { kind: "skip", remaining: padTo(size) };
    if (this.state.remaining === 0) this.state = { kind: "header" };
    const where = `extended header before byte ${this.offset}`;
    if (flag === "x") {
      for (const [k, v] of parsePax(body, this.limits.meta ? isMetaKey : PAX_KEYS, where)) this.pending.set(k, v);
    } else if (flag === "L" || flag === "K") {
      // GNU long names: the body is the name, NUL-terminated.
      const end = body.indexOf(0);
      const text = new TextDecoder().decode(end < 0 ? body : body.subarray(0, end));
      this.pending.set(flag === "L" ? "gnu.path" : "gnu.linkpath", text);
    }
    // "g" (global pax header) carries defaults we do not use: ignored.
  }

  private async onEntry(h: RawHeader): Promise<void> {
    const meta = this.pending;
    this.pending = new Map();
    const name = meta.get("path") ?? meta.get("gnu.path") ?? h.name;
    this.current = name;
    const shown = JSON.stringify(name);
    const hardlink = h.typeflag === "1" && this.limits.meta === true;
    const refused = hardlink ? undefined : REFUSED[h.typeflag];
    if (refused) throw new TarError(`entry ${shown}: ${refused} (type '${h.typeflag}')`);
    // V7 tar marked directories as regular files with a trailing slash.
    const type = hardlink ? "hardlink" : entryType(h.typeflag) === "file" && name.endsWith("/") ? "dir" : entryType(h.typeflag);
    if (!type) throw new TarError(`entry ${shown}: unsupported entry type '${h.typeflag}'`);
    if (SPARSE_KEYS.some((k) => meta.has(k))) throw new TarError(`entry ${shown}: sparse files are not supported`);
    const size = meta.has("size") ? paxNumber(meta.get("size"), "size", shown) : h.size;
    const mtime = meta.has("mtime") ? paxNumber(meta.get("mtime"), "mtime", shown) : h.mtime;

    this.entries++;
    if (this.entries > this.limits.maxEntries) {
      throw new TarError(`entry ${shown}: archive has more than maxEntries (${this.limits.maxEntries}) entries`);
    }
    // Bodies of non-file entries are skipped, not written, but still count: the
    // budget bounds how much we read as well as how much we store.
    this.budget += size;
    if (this.budget > this.limits.maxBytes) {
      throw new TarError(`entry ${shown}: archive exceeds maxBytes (${this.limits.maxBytes} bytes)`);
    }

    const parts = this.rename(entryParts(name), shown);
    const linkpath = type === "symlink" ? (meta.get("linkpath") ?? meta.get("gnu.linkpath") ?? h.linkname) : "";
    if (type === "symlink") checkLinkTarget(name, linkpath);
    this.current = parts.join("/");

    const extra = this.limits.meta ? metaOf(meta, shown) : {};
    if (type === "hardlink") {
      const target = meta.get("linkpath") ?? meta.get("gnu.linkpath") ?? h.linkname;
      const link = this.rename(entryParts(target), JSON.stringify(target));
      await this.sink.begin({ parts, type, mode: h.mode, mtime, size: 0, linkpath: "", link, ...extra });
      this.state = size + padTo(size) > 0 ? { kind: "skip", remaining: size + padTo(size) } : { kind: "header" };
      return;
    }
    if (type !== "file") {
      await this.sink.begin({ parts, type, mode: h.mode, mtime, size: 0, linkpath, ...extra });
      this.state = size + padTo(size) > 0 ? { kind: "skip", remaining: size + padTo(size) } : { kind: "header" };
      return;
    }
    this.bytes += size;
    await this.sink.begin({ parts, type, mode: h.mode, mtime, size, linkpath: "", ...extra });
    this.state = { kind: "data", remaining: size, pad: padTo(size) };
    if (size === 0) await this.endData();
  }

  private async endData(): Promise<void> {
    await this.sink.finish();
    const pad = this.state.kind === "data" ? this.state.pad : 0;
    this.state = pad > 0 ? { kind: "skip", remaining: pad } : { kind: "header" };
  }

  /** Applies `topName`, which requires every entry to share one top component. */
  private rename(parts: string[], shown: string): string[] {
    const top = this.limits.topName;
    if (top === undefined) return parts;
    const [first, ...rest] = parts;
    if (first === undefined) return parts;
    if (this.firstTop === undefined) this.firstTop = first;
    if (first !== this.firstTop) {
      throw new TarError(`entry ${shown}: top component "${first}" differs from "${this.firstTop}"; topName needs a single top entry`);
    }
    return [top, ...rest];
  }
}

function entryType(flag: string): EntryType | undefined {
  // '7' is a contiguous file, which POSIX says to treat as a regular file.
  if (flag === "0" || flag === "7") return "file";
  if (flag === "5") return "dir";
  if (flag === "2") return "symlink";
  return undefined;
}

function paxNumber(text: string | undefined, key: "size" | "mtime", shown: string): number {
  // mtime may be fractional or (before 1970) negative; size must be a whole byte count.
  const pattern = key === "size" ? /^[0-9]{1,16}$/ : /^-?[0-9]{1,16}(\.[0-9]*)?$/;
  const n = text !== undefined && pattern.test(text) ? Math.floor(Number(text)) : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new TarError(`entry ${shown}: pax ${key}="${text}" is not a valid number`);
  return n;
}

/** Exact mtime and owners from pax records, each checked. */
function metaOf(meta: Map<string, string>, shown: string): Pick<Entry, "mtimeNs" | "uid" | "gid" | "xattrs"> {
  const out: Pick<Entry, "mtimeNs" | "uid" | "gid" | "xattrs"> = {};
  const xattrs: [string, string][] = [];
  for (const [k, v] of meta) {
    if (!k.startsWith(XATTR_PAX_PREFIX)) continue;
    const name = k.slice(XATTR_PAX_PREFIX.length);
    if (
      name === "" ||
      new TextEncoder().encode(name).length > XATTR_MAX.nameBytes ||
      v.length > XATTR_MAX.valueChars ||
      !/^[A-Za-z0-9+/]*={0,2}$/.test(v)
    )
      throw new TarError(`entry ${shown}: a bad extended attribute record`);
    xattrs.push([name, v]);
  }
  if (xattrs.length > XATTR_MAX.count) throw new TarError(`entry ${shown}: more than ${XATTR_MAX.count} extended attributes`);
  if (xattrs.length > 0) out.xattrs = xattrs.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const m = meta.get("mtime");
  if (m !== undefined) {
    const t = /^(-?[0-9]{1,16})(?:\.([0-9]{1,9}))?$/.exec(m);
    if (!t) throw new TarError(`entry ${shown}: pax mtime="${m}" is not a valid time`);
    const frac = BigInt((t[2] ?? "").padEnd(9, "0"));
    const sec = BigInt(t[1]!);
    out.mtimeNs = sec * 1_000_000_000n + (t[1]!.startsWith("-") ? -frac : frac);
  }
  for (const k of ["uid", "gid"] as const) {
    const v = meta.get(k);
    if (v === undefined) continue;
    if (!/^[0-9]{1,10}$/.test(v) || Number(v) > 0xffffffff) throw new TarError(`entry ${shown}: pax ${k}="${v}" is not a valid id`);
    out[k] = Number(v);
  }
  return out;
}

function padTo(size: number): number {
  return (BLOCK - (size % BLOCK)) % BLOCK;
}

function joinChunks(chunks: Uint8Array[]): Uint8Array {
  return chunks.length === 1 && chunks[0] ? chunks[0] : joinBytes(chunks);
}
