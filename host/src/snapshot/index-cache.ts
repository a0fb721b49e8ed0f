// The local, disk-backed view of a store's index files: a bun:sqlite database
// (WAL) in the cache directory, never in the store. Opening it costs an
// sqlite open; a lookup is one primary-key probe (~2 µs); memory is sqlite's
// page cache (capped at CACHE_KIB) and a map of the packs lookups have hit,
// whatever the number of files the store holds. Restic and kopia load their
// whole index into RAM and run out of it on big stores; this does not.
//
// It is a copy of what index files say, brought up to date with the store by
// Store.syncIndex, and may be deleted at any time. Several processes share it.
// A save records each pack it uploads at once, under a "pending" file of its
// own; other processes never reuse blobs from another's pending packs (that
// writer may die before it indexes them), and the rows of a writer that died
// are dropped by the next sync.
import { Database, type Statement } from "bun:sqlite";
import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { processAlive } from "../procs.ts";
import type { PackRecord } from "./blob-index.ts";
import { BLOB_TYPES, type BlobEntry, type BlobType } from "./pack.ts";

const CACHE_KIB = 8 * 1024;
const SCHEMA = 2;
const PENDING = "pending:";
/** How long opening the cache retries a busy answer sqlite gave without waiting (the busy_timeout's 30 s). */
const BUSY_RETRY_MS = 30_000;

/** Runs `fn`, again after a short sleep while sqlite answers SQLITE_BUSY, for at most BUSY_RETRY_MS. */
function retryBusy(fn: () => void): void {
  const until = Date.now() + BUSY_RETRY_MS;
  for (let wait = 5; ; wait = Math.min(wait * 2, 200)) {
    try {
      return fn();
    } catch (err) {
      if ((err as { code?: string }).code !== "SQLITE_BUSY" || Date.now() > until) throw err;
      Bun.sleepSync(wait);
    }
  }
}

export interface Located extends BlobEntry {
  pack: string;
  packSize: number;
}

interface BlobRow {
  pack: number;
  flags: number;
  offset: number;
  length: number;
  raw: number;
}

interface PackRow {
  name: string;
  size: number;
  file: number;
}

const TYPES: BlobType[] = ["data", "tree"];

export class IndexCache {
  private readonly db: Database;
  private readonly findStmt: Statement<BlobRow, [Uint8Array, number]>;
  private readonly packStmt: Statement<PackRow, [number]>;
  private readonly insertBlob: Statement<unknown, [Uint8Array, number, number, number, number, number, number]>;
  private readonly insertPack: Statement<{ id: number }, [string, number, number]>;
  /** Pack rows lookups have hit (id → row): a few thousand at most per save. */
  private readonly packRows = new Map<number, PackRow>();
  /** Index files whose rows are visible to this process: committed ones, and its own pending one. */
  private readonly visible = new Set<number>();
  private marked = new Set<string>();
  private pendingFile?: number;

  constructor(dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, "index.db");
    closeSync(openSync(path, "a", 0o600));
    chmodSync(path, 0o600);
    this.db = new Database(path, { create: true, strict: true });
    // The timeout first: two processes opening a new cache at once both switch it to WAL.
    this.db.exec("PRAGMA busy_timeout = 30000");
    // WAL is the file's, set once by whoever made the cache. Asking for it on a cache another process is
    // writing failed now and then with "database is locked" at once, not after the timeout (a prune
    // opening the cache while a save wrote, in the live race test): so it is asked for only when the
    // file is not WAL yet, and a busy answer is tried again.
    retryBusy(() => {
      const mode = (this.db.query("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode;
      if (mode !== "wal") this.db.exec("PRAGMA journal_mode = WAL");
    });
    this.db.exec("PRAGMA synchronous = NORMAL");
    this.db.exec(`PRAGMA cache_size = -${CACHE_KIB}`);
    this.db.exec("PRAGMA temp_store = FILE");
    const version = (this.db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
    if (version !== SCHEMA) {
      this.db
        .transaction(() => {
          this.db.exec("DROP TABLE IF EXISTS blobs; DROP TABLE IF EXISTS packs; DROP TABLE IF EXISTS files;");
          this.db.exec(`
          CREATE TABLE files (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
          CREATE TABLE packs (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, size INTEGER NOT NULL, file INTEGER NOT NULL);
          CREATE INDEX packs_name ON packs(name);
          CREATE INDEX packs_file ON packs(file);
          CREATE TABLE blobs (id BLOB NOT NULL, type INTEGER NOT NULL, pack INTEGER NOT NULL, flags INTEGER NOT NULL,
            offset INTEGER NOT NULL, length INTEGER NOT NULL, raw INTEGER NOT NULL, PRIMARY KEY (id, type, pack)) WITHOUT ROWID;
          CREATE INDEX blobs_pack ON blobs(pack);
          PRAGMA user_version = ${SCHEMA};`);
        })
        .immediate();
    }
    // For prune's queries: the same marks, as a table this connection alone sees.
    this.db.exec("CREATE TEMP TABLE IF NOT EXISTS marked (name TEXT PRIMARY KEY) WITHOUT ROWID");
    this.findStmt = this.db.query("SELECT pack, flags, offset, length, raw FROM blobs WHERE id = ?1 AND type = ?2");
    this.packStmt = this.db.query("SELECT name, size, file FROM packs WHERE id = ?");
    this.insertBlob = this.db.query(
      "INSERT OR IGNORE INTO blobs (id, type, pack, flags, offset, length, raw) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    this.insertPack = this.db.query("INSERT INTO packs (name, size, file) VALUES (?, ?, ?) RETURNING id");
    this.refreshVisible();
  }

  private refreshVisible(): void {
    this.visible.clear();
    this.packRows.clear();
    for (const r of this.db.query("SELECT id, name FROM files").all() as { id: number; name: string }[]) {
      if (!r.name.startsWith(PENDING)) this.visible.add(r.id);
    }
    if (this.pendingFile !== undefined) this.visible.add(this.pendingFile);
  }

  /** Names of the index files the cache holds. */
  files(): Set<string> {
    const rows = this.db.query("SELECT name FROM files").all() as { name: string }[];
    return new Set(rows.map((r) => r.name).filter((n) => !n.startsWith(PENDING)));
  }

  /** Adds one index file's packs in one transaction; a second call for the same file does nothing. */
  addFile(name: string, packs: Iterable<PackRecord>): void {
    this.db
      .transaction(() => {
        if (this.db.query("SELECT id FROM files WHERE name = ?").get(name)) return;
        const { id } = this.db.query("INSERT INTO files (name) VALUES (?) RETURNING id").get(name) as { id: number };
        for (const pack of packs) this.addPackRows(id, pack);
        this.visible.add(id);
      })
      .immediate();
  }

  private addPackRows(file: number, pack: PackRecord): void {
    const { id } = this.insertPack.get(pack.name, pack.size, file)!;
    for (const b of pack.blobs) this.insertBlob.run(b.id, BLOB_TYPES[b.type], id, b.flags, b.offset, b.length, b.rawLength);
  }

  /** Records a pack this process stored, before its index file exists; only this process will reuse its blobs. */
  addPending(pack: PackRecord): void {
    this.db
      .transaction(() => {
        if (this.pendingFile === undefined) {
          const name = `${PENDING}${hostname()}:${process.pid}:${crypto.randomUUID()}`;
          this.pendingFile = (this.db.query("INSERT INTO files (name) VALUES (?) RETURNING id").get(name) as { id: number }).id;
          this.visible.add(this.pendingFile);
        }
        this.addPackRows(this.pendingFile, pack);
      })
      .immediate();
  }

  /**
   * The packs this process added that no index file lists yet, for their
   * index file (encodeIndex): each one's blobs are read a row at a time as
   * it is encoded.
   */
  pending(): { name: string; size: number; blobs: Iterable<BlobEntry> }[] {
    if (this.pendingFile === undefined) return [];
    const packs = this.db.query("SELECT id, name, size FROM packs WHERE file = ? ORDER BY id").all(this.pendingFile) as {
      id: number;
      name: string;
      size: number;
    }[];
    return packs.map((p) => ({ name: p.name, size: p.size, blobs: { [Symbol.iterator]: () => this.rowsIn(p.id) } }));
  }

  /** The pending packs are now in index file `name`: their rows become everyone's. */
  commitPending(name: string): void {
    const pending = this.pendingFile;
    if (pending === undefined) return;
    this.db
      .transaction(() => {
        const ingested = this.db.query("SELECT id FROM files WHERE name = ?").get(name) as { id: number } | null;
        if (!ingested) {
          this.db.query("UPDATE files SET name = ? WHERE id = ?").run(name, pending);
          return;
        }
        // Another process synced the new index file first: its rows are the same as ours.
        this.db.query("DELETE FROM blobs WHERE pack IN (SELECT id FROM packs WHERE file = ?)").run(pending);
        this.db.query("DELETE FROM packs WHERE file = ?").run(pending);
        this.db.query("DELETE FROM files WHERE id = ?").run(pending);
        this.visible.add(ingested.id);
      })
      .immediate();
    this.visible.delete(pending);
    this.packRows.clear();
    this.pendingFile = undefined;
  }

  /** Drops the rows of index files that no longer exist in the store, and of pending files whose writer died. */
  removeFiles(names: string[]): void {
    const dead = (this.db.query("SELECT id, name FROM files WHERE name LIKE 'pending:%'").all() as { id: number; name: string }[]).filter(
      (r) => {
        const [, host, pid] = r.name.split(":");
        return r.id !== this.pendingFile && host === hostname() && !processAlive(Number(pid));
      },
    );
    const ids = [
      ...names.map((n) => (this.db.query("SELECT id FROM files WHERE name = ?").get(n) as { id: number } | null)?.id),
      ...dead.map((r) => r.id),
    ].filter((id): id is number => id !== undefined);
    if (ids.length === 0) return;
    this.db
      .transaction(() => {
        for (const id of ids) {
          this.db.query("DELETE FROM blobs WHERE pack IN (SELECT id FROM packs WHERE file = ?)").run(id);
          this.db.query("DELETE FROM packs WHERE file = ?").run(id);
          this.db.query("DELETE FROM files WHERE id = ?").run(id);
        }
      })
      .immediate();
    this.refreshVisible();
  }

  /** Replaces the set of marked packs: their blobs are not offered for reuse. */
  setMarked(packs: Iterable<string>): void {
    this.marked = new Set(packs);
    this.db.transaction(() => {
      this.db.exec("DELETE FROM temp.marked");
      const ins = this.db.query("INSERT OR IGNORE INTO temp.marked (name) VALUES (?)");
      for (const p of this.marked) ins.run(p);
    })();
  }

  private packRow(id: number): PackRow | null {
    let row = this.packRows.get(id);
    if (!row) {
      row = this.packStmt.get(id) ?? undefined;
      if (!row) return null;
      this.packRows.set(id, row);
    }
    return row;
  }

  private isVisible(file: number): boolean {
    if (this.visible.has(file)) return true;
    // An index file another process added since this one last looked.
    const r = this.db.query("SELECT name FROM files WHERE id = ?").get(file) as { name: string } | null;
    if (!r || r.name.startsWith(PENDING)) return false;
    this.visible.add(file);
    return true;
  }

  /**
   * Runs `fn` (lookups only) in one read transaction: sqlite then takes and
   * drops its shared lock once, not once per query (four syscalls each: a
   * restore's 20k lookups made 56k fcntl and 28k fstat calls).
   */
  reading<T>(fn: () => T): T {
    return this.db.transaction(fn).deferred();
  }

  /**
   * Where a blob is; null if the cache knows no copy. With `reuse`, only in a
   * pack no prune mark names: a save may point a snapshot at that copy.
   */
  find(type: BlobType, id: Uint8Array, reuse: boolean): Located | null {
    const t = BLOB_TYPES[type];
    const first = this.findStmt.get(id, t);
    if (!first) return null;
    const hit = this.usable(first, type, id, reuse);
    if (hit) return hit;
    for (const r of this.findStmt.all(id, t)) {
      const other = this.usable(r, type, id, reuse);
      if (other) return other;
    }
    return null;
  }

  private usable(r: BlobRow, type: BlobType, id: Uint8Array, reuse: boolean): Located | null {
    const p = this.packRow(r.pack);
    if (!p || !this.isVisible(p.file) || (reuse && this.marked.has(p.name))) return null;
    return { type, flags: r.flags, id, offset: r.offset, length: r.length, rawLength: r.raw, pack: p.name, packSize: p.size };
  }

  /**
   * The committed index files and the packs they list, read in one
   * transaction: other processes commit files to the cache at any time, and a
   * prune that rewrites "every file" must rewrite the packs of exactly the
   * files it then deletes.
   */
  snapshotFiles(): { files: string[]; packs: Map<string, number> } {
    return this.db
      .transaction(() => {
        const files = [...this.files()];
        const packs = new Map<string, number>();
        const rows = this.db
          .query("SELECT DISTINCT p.name, p.size FROM packs p JOIN files f ON f.id = p.file WHERE f.name NOT LIKE 'pending:%'")
          .all() as { name: string; size: number }[];
        for (const r of rows) packs.set(r.name, r.size);
        return { files, packs };
      })
      .deferred();
  }

  /** Every distinct committed pack the cache knows, with its size. */
  packs(): Map<string, number> {
    const out = new Map<string, number>();
    for (const r of this.db
      .query("SELECT DISTINCT p.name, p.size FROM packs p JOIN files f ON f.id = p.file WHERE f.name NOT LIKE 'pending:%'")
      .iterate() as Iterable<{ name: string; size: number }>) {
      out.set(r.name, r.size);
    }
    return out;
  }

  private rowsOf(packId: number): BlobEntry[] {
    return [...this.rowsIn(packId)];
  }

  private *rowsIn(packId: number): Generator<BlobEntry> {
    const rows = this.db
      .query("SELECT id, type, flags, offset, length, raw FROM blobs WHERE pack = ? ORDER BY offset")
      .iterate(packId) as Iterable<BlobRow & { id: Uint8Array; type: number }>;
    for (const r of rows) yield { type: TYPES[r.type]!, flags: r.flags, id: r.id, offset: r.offset, length: r.length, rawLength: r.raw };
  }

  /** The blobs of one committed pack (from whichever index file lists it first). */
  blobsOf(pack: string): BlobEntry[] {
    const row = this.db
      .query(
        "SELECT p.id FROM packs p JOIN files f ON f.id = p.file WHERE p.name = ? AND f.name NOT LIKE 'pending:%' ORDER BY p.id LIMIT 1",
      )
      .get(pack) as { id: number } | null;
    return row ? this.rowsOf(row.id) : [];
  }

  /** The underlying database, for prune's and check's scratch tables (TEMP, this connection only). */
  get database(): Database {
    return this.db;
  }

  close(): void {
    this.db.close();
  }
}
