// The set of blobs the snapshots reference, built by walking their trees into
// a TEMP table of the index cache's database: disk-backed, so prune and check
// use bounded memory whatever the number of files. A tree that cannot be read
// stops the walk with an error: deleting from a partial set would lose data.
import type { Database, Statement } from "bun:sqlite";
import { fromHex } from "./crypto.ts";
import { BLOB_TYPES } from "./pack.ts";
import type { SnapshotRecord, Store } from "./store.ts";
import { turn } from "./turns.ts";

export class RefSet {
  private readonly add: Statement<unknown, [Uint8Array, number]>;
  private readonly hasStmt: Statement<{ n: number }, [Uint8Array, number]>;
  trees = 0;
  files = 0;

  constructor(private readonly db: Database) {
    db.exec("CREATE TEMP TABLE IF NOT EXISTS ref_blobs (id BLOB NOT NULL, type INTEGER NOT NULL, PRIMARY KEY (id, type)) WITHOUT ROWID");
    db.exec("DELETE FROM temp.ref_blobs");
    this.add = db.query("INSERT OR IGNORE INTO temp.ref_blobs (id, type) VALUES (?, ?)");
    this.hasStmt = db.query("SELECT 1 AS n FROM temp.ref_blobs WHERE id = ? AND type = ?");
  }

  has(type: "data" | "tree", id: Uint8Array): boolean {
    return this.hasStmt.get(id, BLOB_TYPES[type]) !== null;
  }

  /** Adds every tree and chunk a snapshot needs; trees already added (shared with an earlier snapshot) are not read again. */
  async addSnapshot(store: Store, snap: SnapshotRecord, signal?: AbortSignal): Promise<void> {
    const stack: { id: string; path: string }[] = [{ id: snap.tree, path: `snapshot ${snap.id}` }];
    while (stack.length > 0) {
      signal?.throwIfAborted();
      await turn();
      const { id, path } = stack.pop()!;
      if (this.add.run(fromHex(id), BLOB_TYPES.tree).changes === 0) continue;
      this.trees++;
      const entries = await store.readTree(id, path);
      this.db.transaction(() => {
        for (const e of entries) {
          if (e.type === "file") {
            this.files++;
            for (const c of e.content!) this.add.run(fromHex(c), BLOB_TYPES.data);
          }
        }
      })();
      for (const e of entries)
        if (e.type === "dir") stack.push({ id: e.tree!, path: path.startsWith("snapshot ") ? e.name : `${path}/${e.name}` });
    }
  }
}
