// A box's have-map: which chunks this box's own snapshots hold, keyed by the
// digest the box computes (HMAC-SHA-256 under a key derived from the store's
// id key and the box's id), mapped to the chunk's id in the store. It is what
// the host offers a box at the start of a save ("name these, don't send
// them"), so the answer depends only on what the same box sent before, never
// on what another box of the user stored: the store itself is no membership
// oracle. It lives on the host beside the index cache (0700 directory, 0600
// file), never in the store, and holds no plain content hash: without the
// store's key a digest says nothing about a known file. Like the index
// cache it may be deleted at any time; the next save then sends every chunk.
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { DIGEST_BYTES, MAX_OFFERED } from "@hutch/shared";
import { hex, keyedId } from "./crypto.ts";

const MAGIC = Buffer.from("HUTCHHV1");
const ROW = DIGEST_BYTES + 32 + 4;
const LABEL = "hutch-box-digest-v1\0";

export interface Held {
  id: Uint8Array;
  length: number;
}

/** The key a box digests its chunks with: one-way from the store's id key, so giving it to the box gives nothing of that key away. */
export function boxDigestKey(idKey: Uint8Array, boxId: string): Uint8Array {
  return keyedId(idKey, new TextEncoder().encode(LABEL + boxId));
}

export function digestOf(key: Uint8Array, chunk: Uint8Array): Uint8Array {
  return keyedId(key, chunk);
}

export class HaveMap {
  /** digest (hex) → chunk, in the order they were last seen (newest save first). */
  private readonly old = new Map<string, Held>();
  /** What this save named or sent, in order. */
  private readonly now = new Map<string, Held>();
  /** What this save's offer named: only these of `old` may be named. */
  private offered = new Set<string>();

  private constructor(
    private readonly file: string,
    readonly warning?: string,
  ) {}

  /** The map in `file`; an empty one (with a warning) when the file is missing or not one. */
  static load(file: string): HaveMap {
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch {
      return new HaveMap(file);
    }
    const rows = (bytes.length - MAGIC.length) / ROW;
    if (!bytes.subarray(0, MAGIC.length).equals(MAGIC) || !Number.isInteger(rows) || rows > MAX_OFFERED) {
      return new HaveMap(file, `the box's chunk map ${file} is damaged; this save sends every chunk`);
    }
    const map = new HaveMap(file);
    for (let i = 0; i < rows; i++) {
      const off = MAGIC.length + i * ROW;
      const digest = bytes.subarray(off, off + DIGEST_BYTES).toString("hex");
      const id = new Uint8Array(bytes.subarray(off + DIGEST_BYTES, off + DIGEST_BYTES + 32));
      map.old.set(digest, { id, length: bytes.readUInt32BE(off + DIGEST_BYTES + 32) });
    }
    return map;
  }

  get size(): number {
    return this.old.size;
  }

  /**
   * The digests to offer the box, concatenated: those whose chunk the store
   * can still give (`usable`, which asks the index and the prune marks).
   * Only these may be named in this save.
   */
  offer(usable: (id: Uint8Array) => boolean): { digests: Uint8Array; count: number } {
    const keep: string[] = [];
    for (const [d, h] of this.old) {
      if (keep.length >= MAX_OFFERED) break;
      if (usable(h.id)) keep.push(d);
    }
    const out = new Uint8Array(keep.length * DIGEST_BYTES);
    for (let i = 0; i < keep.length; i++) out.set(Buffer.from(keep[i]!, "hex"), i * DIGEST_BYTES);
    this.offered = new Set(keep);
    return { digests: out, count: keep.length };
  }

  /** The chunk a named digest stands for: only one offered for this save, or sent earlier in it. */
  named(digest: Uint8Array): Held | undefined {
    const d = hex(digest);
    const h = this.now.get(d) ?? (this.offered.has(d) ? this.old.get(d) : undefined);
    if (h) this.touch(d, h);
    return h;
  }

  /** A chunk the box sent in this save, its digest computed here. */
  sent(digest: Uint8Array, id: Uint8Array, length: number): void {
    this.touch(hex(digest), { id, length });
  }

  private touch(d: string, h: Held): void {
    if (!this.now.has(d)) this.now.set(d, h);
  }

  /**
   * Writes this save's chunks first, then older ones, up to MAX_OFFERED, to a
   * temporary file that replaces the old one: a crash leaves the old map or
   * the new, never half of one. Called only once the snapshot is committed.
   */
  save(): void {
    const rows: [string, Held][] = [...this.now];
    for (const row of this.old) {
      if (rows.length >= MAX_OFFERED) break;
      if (!this.now.has(row[0])) rows.push(row);
    }
    rows.length = Math.min(rows.length, MAX_OFFERED);
    const out = Buffer.alloc(MAGIC.length + rows.length * ROW);
    MAGIC.copy(out);
    rows.forEach(([d, h], i) => {
      const off = MAGIC.length + i * ROW;
      out.write(d, off, "hex");
      out.set(h.id, off + DIGEST_BYTES);
      out.writeUInt32BE(h.length, off + DIGEST_BYTES + 32);
    });
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, out);
      fsyncSync(fd);
    } catch (err) {
      closeSync(fd);
      rmSync(tmp, { force: true });
      throw err;
    }
    closeSync(fd);
    renameSync(tmp, this.file);
  }
}
