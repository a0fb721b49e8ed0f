// A session's records on its JetStream subject, and the fold that turns them
// into the session's row, its last seq, its idempotency keys and an index of
// its event batches. Everything a session is lives on one subject, in the
// order JetStream stored it, so every server folds the same records to the
// same state. Headers carry all the fold needs, so a cold server folds a
// session reading headers only; payloads (the events' wire JSON) are read
// only when events are.
import type { MsgHdrs } from "@nats-io/transport-node";
import type { NewSessionRow, SessionFields, SessionRow } from "../types.ts";

export const H = {
  /** "row" (the session is made), "events" (a batch), "fields" (a row change alone). */
  record: "Hutch-Record",
  /** The new session's row (JSON), on a "row" record. */
  row: "Hutch-Row",
  /** The batch's first seq and its count of events; its payload is their wire JSON, one line each. */
  seq: "Hutch-Seq",
  count: "Hutch-Count",
  /** The batch's idempotency keys: JSON [[offset in batch, key], ...]. */
  keys: "Hutch-Keys",
  /** The batch's event kinds, comma-separated, in order (for kindBefore without reading payloads). */
  kinds: "Hutch-Kinds",
  /** The writer's id for this record, the same on every retry: how a writer knows its record in a slot. */
  append: "Hutch-Append",
  /** A row change (JSON SessionFields), on an "events" or a "fields" record. */
  fields: "Hutch-Fields",
} as const;

/** One stored batch: its events' seqs first..first+count-1, at this stream sequence. */
export interface Batch {
  first: number;
  count: number;
  streamSeq: number;
  kinds: string[];
}

/** A session as folded from its records up to stream sequence `streamSeq`. */
export interface Folded {
  row: SessionRow;
  /** The stream sequence of the last record folded (what the next write expects as the subject's last). */
  streamSeq: number;
  /** Where the session's row record is in the stream: ties in created_at are broken by it. */
  createdSeq: number;
  keys: Map<string, number>;
  batches: Batch[];
}

function fresh(row: NewSessionRow): SessionRow {
  return {
    ...row,
    last_seq: 0,
    pty_chunks: 0,
    pty_bytes: 0,
    pty_dropped: 0,
    closed_at: null,
    driver: null,
    driver_lease_ms: null,
    driver_expires_at: null,
  };
}

/**
 * Folds one record into `f` (or starts a session from its row record).
 * Idempotent: a record at or before what was folded is ignored, so two
 * readers catching up at once cannot fold it twice.
 */
export function fold(f: Folded | undefined, h: MsgHdrs | undefined, streamSeq: number): Folded | undefined {
  if (f && streamSeq <= f.streamSeq) return f;
  const kind = h?.get(H.record);
  if (kind === "row") {
    if (f) return f;
    const row = JSON.parse(h!.get(H.row)) as NewSessionRow;
    return { row: fresh(row), streamSeq, createdSeq: streamSeq, keys: new Map(), batches: [] };
  }
  if (!f) return f;
  f.streamSeq = streamSeq;
  if (kind === "events") {
    const first = Number(h!.get(H.seq));
    const count = Number(h!.get(H.count));
    const kinds = h!.get(H.kinds) ? h!.get(H.kinds).split(",") : [];
    f.batches.push({ first, count, streamSeq, kinds });
    f.row.last_seq = first + count - 1;
    const keys = h!.get(H.keys);
    if (keys) for (const [offset, key] of JSON.parse(keys) as [number, string][]) f.keys.set(key, first + offset);
  }
  const fields = h?.get(H.fields);
  if (fields) Object.assign(f.row, JSON.parse(fields) as SessionFields);
  return f;
}

/** The batch holding seq, by binary search (batches are in seq order, gapless). */
export function batchOf(batches: Batch[], seq: number): number {
  let lo = 0;
  let hi = batches.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const b = batches[mid]!;
    if (seq < b.first) hi = mid - 1;
    else if (seq >= b.first + b.count) lo = mid + 1;
    else return mid;
  }
  return lo;
}
