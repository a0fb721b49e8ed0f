// The daemon's own stored secrets (`hutch secret set`), redacted from a
// transcript before it is written anywhere, as `[secret:NAME]`. The values
// never leave the daemon: the transcript's strings go to it
// (POST /v1/secrets/find, the caller's own secrets only) and only where each
// value (raw or base64) occurs, and whose it is, comes back. So it works the
// same against a remote daemon. Strings longer than one request's piece go
// in overlapping pieces, the overlap longer than any stored value's longest
// spelling, so no occurrence falls between two pieces.
import { SECRET_FIND_MIN, SECRET_FIND_TEXT_MAX, type SecretFindResult, type SecretFound } from "@hutch/shared";
import type { DaemonClient } from "../../client/daemon.ts";
import type { Records } from "./transcript.ts";

/** A stored secret is at most 16 KiB; its base64 at most this long. */
const LONGEST_FORM = Math.ceil((16 * 1024) / 3) * 4;
const PIECE = SECRET_FIND_TEXT_MAX - LONGEST_FORM;
/** One request's texts, as JSON: well inside the API's body bound. */
const BATCH_BYTES = 8 * 1024 * 1024;
const BATCH_TEXTS = 10_000;

export type FindSecrets = (texts: string[]) => Promise<SecretFound[]>;

/** Asks the daemon (local or remote) where its stored values are in texts. */
export const daemonFinder =
  (d: DaemonClient): FindSecrets =>
  async (texts) =>
    (await d.request<SecretFindResult>("POST", "/v1/secrets/find", { texts })).found;

export const marker = (name: string) => `[secret:${name}]`;

/** Every string of the records with each stored secret's occurrence replaced by its marker; counts by secret name. */
export async function redactStored(records: Records, find: FindSecrets): Promise<{ records: Records; counts: Record<string, number> }> {
  const strings = new Set<string>();
  const collect = (v: unknown): void => {
    if (typeof v === "string") {
      if (v.length >= SECRET_FIND_MIN) strings.add(v);
    } else if (Array.isArray(v)) v.forEach(collect);
    else if (v && typeof v === "object") Object.values(v).forEach(collect);
  };
  records.forEach(collect);
  const list = [...strings];
  // Pieces of each string: [string index, offset, text].
  const pieces: [number, number, string][] = [];
  list.forEach((s, i) => {
    for (let at = 0; at < s.length; at += PIECE) {
      pieces.push([i, at, s.slice(at, at + PIECE + LONGEST_FORM)]);
      if (at + PIECE + LONGEST_FORM >= s.length) break;
    }
  });
  const hits = new Map<number, { at: number; length: number; secret: string }[]>();
  for (let start = 0; start < pieces.length; ) {
    let end = start;
    let bytes = 0;
    while (end < pieces.length && end - start < BATCH_TEXTS) {
      const b = Buffer.byteLength(JSON.stringify(pieces[end]![2]));
      if (end > start && bytes + b > BATCH_BYTES) break;
      bytes += b;
      end++;
    }
    const batch = pieces.slice(start, end);
    for (const f of await find(batch.map((p) => p[2]))) {
      const p = batch[f.text];
      if (!p) continue;
      const [i, offset] = p;
      hits.set(i, [...(hits.get(i) ?? []), { at: offset + f.at, length: f.length, secret: f.secret }]);
    }
    start = end;
  }
  const counts: Record<string, number> = {};
  const replaced = new Map<string, string>();
  for (const [i, found] of hits) {
    const s = list[i]!;
    // Earliest first, the longest at one place; an occurrence overlapping one taken is inside it.
    found.sort((a, b) => a.at - b.at || b.length - a.length);
    let out = "";
    let last = 0;
    for (const h of found) {
      if (h.at < last) continue;
      out += s.slice(last, h.at) + marker(h.secret);
      last = h.at + h.length;
      counts[h.secret] = (counts[h.secret] ?? 0) + 1;
    }
    replaced.set(s, out + s.slice(last));
  }
  if (!replaced.size) return { records, counts };
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return replaced.get(v) ?? v;
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return { records: records.map((r) => walk(r) as Record<string, unknown>), counts };
}

/** A note saying what was redacted (names and counts, never a value). */
export function redactedNote(counts: Record<string, number>, what: string): string | null {
  const names = Object.keys(counts).sort();
  if (!names.length) return null;
  const n = names.reduce((a, k) => a + counts[k]!, 0);
  return `${n} occurrence${n === 1 ? "" : "s"} of the daemon's stored secret${names.length === 1 ? "" : "s"} ${names.join(", ")} redacted from ${what}`;
}
