// The session log against its floor, measured in the same run: raw bun:sqlite
// doing the same inserts and reads in a WAL database like the daemon's.
//   append, single    one event per request, each durable before the answer
//   append, batched   1,000 events per request
//   replay            a subscriber replaying the whole log over its WebSocket
//   catch-up          reconnecting after 10,000 events were missed
//
//   bun scripts/bench/sessions.ts [--json] [--events 200000]
import { parseArgs } from "node:util";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HutchHome, log, requireHutch } from "./lib/env.ts";
import { round, table } from "./lib/stats.ts";

const { values: flags } = parseArgs({
  options: { json: { type: "boolean", default: false }, events: { type: "string", default: "200000" } },
});
const REPLAY_EVENTS = Number(flags.events);
const SINGLE = 2000;
const BATCH = 1000;
const MISSED = 10_000;
const GOALS = { batched: 100_000, replay: 1_000_000, catchUpMs: 100 };

requireHutch();
const home = new HutchHome();
const sock = join(home.dir, "hutch.sock");

const post = (path: string, body: unknown) => home.post(path, body);

const event = (i: number) => ({ kind: "annotation.added", data: { text: `event ${i} of the benchmark` } });

/** Subscribes from a seq and resolves with the time until `until` has arrived. */
function replay(session: string, from: number, until: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const ws = new WebSocket(`ws+unix://${sock}:/v1/sessions/${session}/subscribe?from=${from}`);
    ws.onmessage = (e) => {
      const text = String(e.data);
      // The last line of a message carries its highest seq.
      const last = text.slice(text.lastIndexOf("\n") + 1);
      const m = /"seq":(\d+)/.exec(last);
      if (m && Number(m[1]) >= until && !last.includes("caught-up")) {
        const ms = performance.now() - t0;
        ws.close();
        resolve(ms);
      }
    };
    ws.onclose = (e) => (e.code !== 1000 && e.code !== 1005 ? reject(new Error(`closed ${e.code} ${e.reason}`)) : undefined);
  });
}

/** The floor: the same rows through bun:sqlite directly, same pragmas as the daemon. */
function floor() {
  const dir = mkdtempSync(join(tmpdir(), "hutch-bench-sqlite-"));
  const db = new Database(join(dir, "peer.db"));
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
  db.exec(
    "CREATE TABLE events (session_id TEXT, seq INTEGER, at TEXT, actor TEXT, kind TEXT, data TEXT, PRIMARY KEY (session_id, seq)) WITHOUT ROWID",
  );
  const ins = db.prepare("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)");
  const row = (i: number) =>
    ["s", i, new Date().toISOString(), '{"kind":"user","id":"root"}', "annotation.added", JSON.stringify(event(i).data)] as const;
  let t0 = performance.now();
  for (let i = 1; i <= SINGLE; i++) ins.run(...row(i));
  const single = SINGLE / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  db.transaction(() => {
    for (let i = SINGLE + 1; i <= SINGLE + REPLAY_EVENTS; i++) ins.run(...row(i));
  })();
  const batched = REPLAY_EVENTS / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  const rows = db.prepare("SELECT seq, at, actor, kind, data FROM events WHERE session_id = 's' AND seq >= ? ORDER BY seq").values(1);
  const replayRate = rows.length / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  db.prepare("SELECT seq, at, actor, kind, data FROM events WHERE session_id = 's' AND seq > ? ORDER BY seq").values(
    SINGLE + REPLAY_EVENTS - MISSED,
  );
  const catchUpMs = performance.now() - t0;
  db.close();
  rmSync(dir, { recursive: true, force: true });
  return { single, batched, replay: replayRate, catchUpMs };
}

try {
  log("starting a box and a session");
  await home.createBox("bench-ses");
  const ses = (await post("/v1/sessions", { box: "bench-ses" })) as { id: string };
  await Bun.sleep(500);

  log(`append, single: ${SINGLE} requests`);
  let t0 = performance.now();
  for (let i = 0; i < SINGLE; i++) await post(`/v1/sessions/${ses.id}/events`, { events: [event(i)] });
  const single = SINGLE / ((performance.now() - t0) / 1000);

  log(`append, batched: ${REPLAY_EVENTS} events in requests of ${BATCH}`);
  t0 = performance.now();
  let last = 0;
  for (let i = 0; i < REPLAY_EVENTS; i += BATCH) {
    const r = (await post(`/v1/sessions/${ses.id}/events`, { events: Array.from({ length: BATCH }, (_, j) => event(i + j)) })) as {
      seqs: number[];
    };
    last = r.seqs[r.seqs.length - 1]!;
  }
  const batched = REPLAY_EVENTS / ((performance.now() - t0) / 1000);

  log(`replay: ${last} events over a subscription`);
  const replayMs = await replay(ses.id, 1, last);
  const replayRate = last / (replayMs / 1000);

  log(`catch-up: ${MISSED} missed events`);
  const from = last + 1;
  for (let i = 0; i < MISSED; i += BATCH) {
    const r = (await post(`/v1/sessions/${ses.id}/events`, { events: Array.from({ length: BATCH }, (_, j) => event(i + j)) })) as {
      seqs: number[];
    };
    last = r.seqs[r.seqs.length - 1]!;
  }
  const catchUpMs = await replay(ses.id, from, last);

  log("the floor: the same work in bun:sqlite directly");
  const peer = floor();

  const result = {
    events: REPLAY_EVENTS,
    appendSingle: { hutch: round(single, 0), sqlite: round(peer.single, 0), ratio: round(single / peer.single, 3) },
    appendBatched: {
      hutch: round(batched, 0),
      sqlite: round(peer.batched, 0),
      ratio: round(batched / peer.batched, 3),
      goal: GOALS.batched,
      met: batched >= GOALS.batched,
    },
    replay: {
      hutch: round(replayRate, 0),
      sqlite: round(peer.replay, 0),
      ratio: round(replayRate / peer.replay, 3),
      goal: GOALS.replay,
      met: replayRate >= GOALS.replay,
    },
    catchUp: {
      hutchMs: round(catchUpMs, 1),
      sqliteMs: round(peer.catchUpMs, 1),
      ratio: round(catchUpMs / peer.catchUpMs, 2),
      goalMs: GOALS.catchUpMs,
      met: catchUpMs < GOALS.catchUpMs,
    },
  };
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    process.stdout.write(
      table(
        ["measure", "hutch", "sqlite floor", "hutch/floor", "goal"],
        [
          [
            "append, single (events/s)",
            String(result.appendSingle.hutch),
            String(result.appendSingle.sqlite),
            String(result.appendSingle.ratio),
            "-",
          ],
          [
            "append, batched (events/s)",
            String(result.appendBatched.hutch),
            String(result.appendBatched.sqlite),
            String(result.appendBatched.ratio),
            `≥ ${GOALS.batched} ${result.appendBatched.met ? "met" : "MISSED"}`,
          ],
          [
            "replay (events/s)",
            String(result.replay.hutch),
            String(result.replay.sqlite),
            String(result.replay.ratio),
            `≥ ${GOALS.replay} ${result.replay.met ? "met" : "MISSED"}`,
          ],
          [
            `catch-up, ${MISSED} missed (ms)`,
            String(result.catchUp.hutchMs),
            String(result.catchUp.sqliteMs),
            String(result.catchUp.ratio),
            `< ${GOALS.catchUpMs} ${result.catchUp.met ? "met" : "MISSED"}`,
          ],
        ],
      ),
    );
  }
} finally {
  await home.dispose();
}
