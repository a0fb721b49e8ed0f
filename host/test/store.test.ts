import { describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate, openDb } from "../src/store/db.ts";
import { MIGRATIONS } from "../src/store/migrations.ts";

describe("store", () => {
  test("migrations run once, in order, and are recorded", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-db-"));
    try {
      const db = openDb(join(dir, "a.db"));
      expect(db.query("PRAGMA user_version").get()).toEqual({ user_version: MIGRATIONS.length });
      expect(db.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
      migrate(db);
      expect(db.query("PRAGMA user_version").get()).toEqual({ user_version: MIGRATIONS.length });
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a database from a newer hutch is refused, not altered", () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-db-"));
    try {
      const path = join(dir, "b.db");
      const raw = new Database(path);
      raw.exec(`PRAGMA user_version = ${MIGRATIONS.length + 5}`);
      raw.close();
      expect(() => openDb(path)).toThrow(/newer than this hutch knows/);
      const again = new Database(path);
      expect(again.query("PRAGMA user_version").get()).toEqual({ user_version: MIGRATIONS.length + 5 });
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
