// The session log's contract on SQLite: a real database file in a temp dir,
// each handle its own connection to it (as a second daemon process would be).
// SQLite adds one promise of its own: two processes appending to one file at
// once both succeed (a write transaction takes its lock before it reads the
// last seq, so busy_timeout can wait instead of failing on the upgrade).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDb } from "../src/store/db.ts";
import { asyncSessionLog } from "../src/store/session-log-async.ts";
import { SessionStore } from "../src/store/sessions.ts";
import { describeSessionLogContract } from "./contracts/session-log.contract.ts";
import { describeSessionLogAsyncContract } from "./contracts/session-log-async.contract.ts";

function sqlite<T>(wrap: (s: SessionStore) => T) {
  return () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-session-log-"));
    return {
      open: () => {
        const db = openDb(join(dir, "hutch.db"));
        return { store: wrap(new SessionStore(db)), close: () => db.close() };
      },
      dispose: () => rmSync(dir, { recursive: true, force: true }),
    };
  };
}

describeSessionLogContract(
  "SQLite",
  sqlite((s) => s),
);
describeSessionLogAsyncContract("SQLite", sqlite(asyncSessionLog));

describe("SessionLog on SQLite", () => {
  test("two processes appending to one session at once: none fails, seqs gapless", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hutch-session-log-"));
    try {
      const path = join(dir, "hutch.db");
      const db = openDb(path);
      const log = new SessionStore(db);
      log.insert({
        id: "ses_1",
        box_id: "box_a",
        agent: "shell",
        label: null,
        state: "open",
        owner: "a",
        argv: "[]",
        pty: null,
        created_at: new Date().toISOString(),
      });
      const n = 500;
      const start = Date.now() + 1000;
      const writers = ["a", "b"].map((tag) =>
        Bun.spawn(["bun", join(import.meta.dir, "session-log-writer.ts"), path, "ses_1", tag, String(n), String(start)], {
          stdout: "pipe",
          stderr: "inherit",
        }),
      );
      const outs = await Promise.all(
        writers.map(
          async (w) => JSON.parse(await new Response(w.stdout).text()) as { appended: number; failed: number; firstError?: string },
        ),
      );
      expect(outs).toEqual([
        { appended: n, failed: 0 },
        { appended: n, failed: 0 },
      ]);
      const { text } = log.readText("ses_1", 1, 10 * n);
      const seqs = text.split("\n").map((l) => (JSON.parse(l) as { seq: number }).seq);
      expect(seqs).toEqual(Array.from({ length: 2 * n }, (_, i) => i + 1));
      expect(log.last("ses_1")).toBe(2 * n);
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
