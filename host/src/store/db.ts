// The daemon's database: bun:sqlite in WAL mode with numbered migrations.
// WAL + synchronous=NORMAL survives a killed process (not a power cut) with
// every committed transaction, which is the promise "acknowledged = kept".
import { Database } from "bun:sqlite";
import { chmodSync, closeSync, openSync, statSync } from "node:fs";
import { MIGRATIONS } from "./migrations.ts";

export function openDb(path: string): Database {
  if (path !== ":memory:") ownerOnly(path);
  const db = new Database(path, { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA foreign_keys = ON");
  db.exec("PRAGMA busy_timeout = 5000");
  migrate(db);
  return db;
}

export function migrate(db: Database): void {
  const current = (db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
  if (current > MIGRATIONS.length) {
    throw new Error(`database schema version ${current} is newer than this hutch knows (${MIGRATIONS.length}); upgrade hutch`);
  }
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.exec(`PRAGMA user_version = ${v + 1}`);
    })();
  }
}

/**
 * The database holds every box, session log and egress record: 0600 whatever
 * the umask. SQLite creates -wal and -shm with the database file's mode, so
 * creating it first is enough for new ones; files an older hutch made 0644 are
 * tightened here.
 */
function ownerOnly(path: string): void {
  closeSync(openSync(path, "a", 0o600));
  for (const p of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      const mode = statSync(p).mode & 0o777;
      if (mode & 0o077) chmodSync(p, mode & 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
}
