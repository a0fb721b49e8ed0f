// What an approval is bound to: the sha256 of exactly what would be done, as
// a list of parts each source names (README.md lists them per kind).
import { createHash } from "node:crypto";

/** sha256 over length-prefixed parts, so no two different lists hash to the same bytes. */
export function digestOf(parts: (string | Uint8Array)[]): string {
  const h = createHash("sha256");
  for (const p of parts) {
    const bytes = typeof p === "string" ? new TextEncoder().encode(p) : p;
    h.update(`${bytes.length}:`);
    h.update(bytes);
  }
  return `sha256:${h.digest("hex")}`;
}
