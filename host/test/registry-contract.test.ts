// The registry's contract on SQLite: boxes, ops, users, tokens, shares and
// the broker's rows in one real database file in a temp dir, each handle its
// own connection to it, in the async form the suite calls.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthStore } from "../src/store/auth.ts";
import { BoxStore } from "../src/store/boxes.ts";
import { BrokerStore } from "../src/store/broker.ts";
import { openDb } from "../src/store/db.ts";
import { asyncRegistry } from "../src/store/registry-async.ts";
import { ScheduleStore } from "../src/store/schedules.ts";
import { describeRegistryContract } from "./contracts/registry.contract.ts";

describeRegistryContract("SQLite", () => {
  const dir = mkdtempSync(join(tmpdir(), "hutch-registry-"));
  return {
    open: () => {
      const db = openDb(join(dir, "hutch.db"));
      return {
        store: asyncRegistry({
          boxes: new BoxStore(db),
          auth: new AuthStore(db),
          broker: new BrokerStore(db),
          schedules: new ScheduleStore(db),
        }),
        close: () => db.close(),
      };
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
});
