// The session log's contract on SQLite: a real database file in a temp dir,
// each handle its own connection to it (as a second daemon process would be).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDb } from "../src/store/db.ts";
import { SessionStore } from "../src/store/sessions.ts";
import { describeSessionLogContract } from "./contracts/session-log.contract.ts";

describeSessionLogContract("SQLite", () => {
  const dir = mkdtempSync(join(tmpdir(), "hutch-session-log-"));
  return {
    open: () => {
      const db = openDb(join(dir, "hutch.db"));
      return { store: new SessionStore(db), close: () => db.close() };
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
});
