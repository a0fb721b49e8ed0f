// Snapshot text as data: what changed between two snapshots, and one page of
// a long one. The snapshot itself is computed in the page (./in-page.js).

/**
 * What changed from one snapshot's lines to the next: the common head and
 * tail are cut away and the middle is shown as `- ` (gone) and `+ ` (new)
 * lines under an `@@` header. Linear in the size, which is what matters for a
 * page of thousands of lines where one thing changed.
 */
export function deltaLines(before: string[], after: string[]): string[] {
  let head = 0;
  while (head < before.length && head < after.length && before[head] === after[head]) head++;
  let tail = 0;
  while (tail < before.length - head && tail < after.length - head && before[before.length - 1 - tail] === after[after.length - 1 - tail])
    tail++;
  const gone = before.slice(head, before.length - tail);
  const added = after.slice(head, after.length - tail);
  if (gone.length === 0 && added.length === 0) return [];
  return [`@@ line ${head + 1}: ${gone.length} gone, ${added.length} new`, ...gone.map((l) => `- ${l}`), ...added.map((l) => `+ ${l}`)];
}

/** Lines from `start` that fit in `maxBytes` (at least one), and where the next part starts if any is left. */
export function page(lines: string[], start: number, maxBytes: number): { text: string; next?: number } {
  let bytes = 0;
  let end = start;
  while (end < lines.length) {
    const size = Buffer.byteLength(lines[end] ?? "") + 1;
    if (end > start && bytes + size > maxBytes) break;
    bytes += size;
    end++;
  }
  const text = lines.slice(start, end).join("\n");
  return end < lines.length ? { text, next: end } : { text };
}
