// Byte arrays joined end to end: the one copy the tar writer and reader, the
// snapshot store's sealing and their tests share.

/** The parts, in order, as one new array. */
export function joinBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
