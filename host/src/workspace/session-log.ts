// The story of work done elsewhere, brought home with it: every event of the
// sessions on the box's daemon is appended to a local session's log as a
// `session.event.imported` (its kind, data, actor and time kept, and where it
// came from), then one `session.work.returned` names what came back. All
// through the two daemons' APIs. The box's daemon is not trusted: each page
// and each event is checked (its shape, then its data against the registry)
// and one that does not fit is refused, not imported. Each import carries an
// idempotency key from its origin, so a rerun (after a kill, or the next
// bring-back) appends only what the local log does not hold yet.
import { check, checkEvent, EventsPage, Events, emit, type EventInput, type Session } from "@hutch/shared";
import { HutchError } from "@hutch/shared/base";
import type { DaemonClient } from "../client/daemon.ts";

/** A multiple of BATCH, so pages and blocks line up. */
const PAGE = 500;
/** Events appended per request: each can hold up to 64 KiB of text. */
const BATCH = 100;
/** A bound on what one bring-back imports (a box's daemon is not trusted to be finite). */
const MAX_EVENTS = 200_000;

export interface Imported {
  session: string;
  remote: string;
  /** The box's sessions whose events were read, oldest first. */
  from: string[];
  /** Events of those sessions now in the local log (a rerun appends none of them twice). */
  events: number;
}

/** The local session the story goes into: it must exist, be the caller's, and be open. */
export async function checkTarget(local: DaemonClient, session: string, box: string): Promise<void> {
  const target = await local.request<Session>("GET", `/v1/sessions/${encodeURIComponent(session)}`);
  if (target.state !== "open")
    throw new HutchError(
      "conflict",
      `session ${session} is closed: its log takes no more events`,
      `start a session to continue the story in (hutch session start), then: hutch bring-back ${box} --session NEW`,
    );
}

export async function importSessionLogs(
  remote: DaemonClient,
  local: DaemonClient,
  opts: { box: string; remoteName: string; session: string; case: string },
  progress: (s: string) => void = () => {},
): Promise<Imported> {
  await checkTarget(local, opts.session, opts.box);
  const sessions = (
    await remote.request<Session[]>("GET", `/v1/sessions?box=${encodeURIComponent(opts.box)}`).catch((err) => {
      if (err instanceof HutchError && err.code === "not_found") return [] as Session[];
      throw err;
    })
  )
    .filter((s) => s.id !== opts.session)
    .sort((a, b) => (a.id < b.id ? -1 : 1));
  let total = 0;
  for (const s of sessions) {
    progress(`appending the log of session ${s.id} (box ${opts.box} on ${opts.remoteName}) to ${opts.session}`);
    total += await appendLog(remote, local, s.id, opts.remoteName, opts.session, MAX_EVENTS - total);
  }
  await local.request("POST", `/v1/sessions/${encodeURIComponent(opts.session)}/events`, {
    events: [
      emit(Events.sessionWorkReturned, {
        box: opts.box,
        remote: opts.remoteName,
        case: opts.case,
        sessions: sessions.map((s) => s.id).slice(0, 1000),
        events: total,
      }),
    ],
  });
  return { session: opts.session, remote: opts.remoteName, from: sessions.map((s) => s.id), events: total };
}

/**
 * Appends every event of session `source` (on `from`) to session `target`
 * (on `to`) as session.event.imported, checked and exactly once; returns how
 * many the source holds.
 */
export async function appendLog(
  from: DaemonClient,
  to: DaemonClient,
  source: string,
  sourceName: string,
  target: string,
  max = MAX_EVENTS,
): Promise<number> {
  let total = 0;
  // Requests hold aligned blocks of BATCH seqs under a key naming the block: the daemon gives event i of a
  // request the key `KEY#i`, so an event keeps its key however many events followed it in a later run.
  let batch: EventInput[] = [];
  let block = 0;
  const flush = async () => {
    if (!batch.length) return;
    await to.request(
      "POST",
      `/v1/sessions/${encodeURIComponent(target)}/events`,
      { events: batch },
      { idempotencyKey: `imp:${source}:${block}` },
    );
    batch = [];
  };
  let expect = 1;
  for (;;) {
    const page = await from.request<unknown>("GET", `/v1/sessions/${encodeURIComponent(source)}/events?from=${expect}&limit=${PAGE}`);
    if (!check(EventsPage, page))
      throw new HutchError("denied", `the log of session ${source} came back malformed`, "nothing more was imported; rerun to retry");
    for (const e of page.events) {
      if (e.session !== source || e.seq !== expect)
        throw new HutchError(
          "denied",
          `the log of session ${source} is out of order at seq ${e.seq} (expected ${expect})`,
          "rerun to retry",
        );
      expect++;
      const problem = checkEvent(e.kind, e.data);
      if (problem)
        throw new HutchError(
          "denied",
          `session ${source}'s event ${e.seq} (${e.kind}) does not fit its kind: ${problem}`,
          "nothing after it was imported; the box's daemon may be another version",
        );
      if (++total > max) throw new HutchError("denied", `the logs hold more than ${MAX_EVENTS} events`, "import the rest by hand");
      const b = Math.floor((e.seq - 1) / BATCH);
      if (b !== block) await flush();
      block = b;
      batch.push(
        emit(Events.sessionEventImported, {
          from: { remote: sourceName, session: source, seq: e.seq },
          at: e.at,
          actor: e.actor,
          kind: e.kind,
          data: e.data,
        }),
      );
    }
    if (!page.events.length || page.next > page.last) break;
  }
  await flush();
  return total;
}
