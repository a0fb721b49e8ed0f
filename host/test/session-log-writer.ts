// A child process for session-log-contract.test.ts: appends to one session of
// a database file through its own connection, as a second process would.
//
//   bun session-log-writer.ts <db> <session> <tag> <count> <start-ms>
//
// At <start-ms> (so that two writers overlap), appends <count> annotations
// "<tag><i>", one per transaction; prints
// {appended, failed, firstError}.
import { emit, Events } from "@hutch/shared";
import { openDb } from "../src/store/db.ts";
import { SessionStore } from "../src/store/sessions.ts";

const [path, session, tag, countText, startText] = process.argv.slice(2);
const db = openDb(path!);
const log = new SessionStore(db);
await Bun.sleep(Math.max(0, Number(startText) - Date.now()));
let appended = 0;
let failed = 0;
let firstError: string | undefined;
for (let i = 0; i < Number(countText); i++) {
  try {
    log.append(session!, [{ ...emit(Events.annotationAdded, { text: `${tag}${i}` }), actor: { kind: "user", id: tag! } }]);
    appended++;
  } catch (err) {
    failed++;
    firstError ??= String(err);
  }
}
db.close();
console.log(JSON.stringify({ appended, failed, firstError }));
