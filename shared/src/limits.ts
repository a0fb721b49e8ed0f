// Bounds on the daemon's API, as plain numbers: the schemas (api.ts) check
// them and the CLI's hot paths (base.ts) page by them without loading a schema.
/**
 * Bounds on what a client may send, so every bad input is a 400 naming the
 * field and nothing unbounded reaches SQLite, a schema check or an event stream.
 */
export const API_LIMITS = {
  /** A request body: a JSON object of at most this many bytes (the server refuses longer ones before reading them)... */
  bodyBytes: 16 * 1024 * 1024,
  /** ...nested at most this deep (every object or array is a level). */
  depth: 32,
  /**
   * The data of one client event, as JSON text. The largest a registered kind
   * allows is about 70 KiB (64 KiB texts and a 4 KiB anchor path); the rest is
   * room for the extra fields kinds accept, bounded so one event always fits a
   * subscriber's buffer.
   */
  eventData: 256 * 1024,
  /** seqs, output chunks: whole numbers a double holds exactly. */
  whole: Number.MAX_SAFE_INTEGER,
  eventsPage: 10_000,
  /**
   * A page of the log ends at the event that brings its JSON to this many
   * characters (a page holds at least one event): 10,000 events of a few
   * hundred bytes fit, 10,000 of the largest would not be held at once.
   */
  eventsPageLength: 8 * 1024 * 1024,
  egressPage: 1_000,
} as const;
