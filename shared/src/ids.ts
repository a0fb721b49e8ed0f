// Prefixed, time-sortable ids: <prefix>_<10 chars of ms time><10 random>, Crockford base32, lower case.
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export type IdPrefix = "box" | "ses" | "snap" | "op" | "pty" | "evt" | "dsp" | "upl" | "apr" | "sch";

/** What follows an id's prefix and its `_`, unanchored (to compose into other patterns). */
export const ID_BODY = "[0-9a-z]{20}";

/** The whole-string pattern of an id with this prefix, for schemas and RegExps. */
export const idPattern = (prefix: IdPrefix): string => `^${prefix}_${ID_BODY}$`;

export function newId(prefix: IdPrefix, now = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const rand = crypto.getRandomValues(new Uint8Array(10));
  let tail = "";
  for (const b of rand) tail += ALPHABET[b % 32];
  return `${prefix}_${time}${tail}`;
}
