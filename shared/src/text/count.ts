// A count and its noun, in the number the count needs: "1 file", "2 files",
// "0 files". Every human sentence that states how many of something goes
// through it, so a summary never says "1 files" or hedges with "file(s)".

/** `n` and the noun, singular for exactly 1; `plural` for nouns that do not take an "s" (entry, entries). */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}
