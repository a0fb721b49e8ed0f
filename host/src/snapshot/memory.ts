// Keeping a save's or a restore's memory flat. The buffers zstd and the
// cipher return live outside the JavaScript heap and do not count as its
// growth, so the collector let 100–200 MB of dead ones pile up before it ran
// (peak RSS 180–330 MB on the bench tree), and the allocator kept those pages
// afterwards. A full collection after every EVERY bytes of dropped buffers
// keeps dead ones from piling up in the first place. On scripts/bench's
// snapshot tree (20k small files, 300 MiB of large ones) a first save peaked
// at 130–144 MB collecting every 4 MiB against 166–187 MB every 16 MiB, in the
// same time within the machine's noise. An asynchronous collection (Bun.gc(false)) costs nothing but
// left the peak at 145–180 MB. In a process with a bigger heap (the daemon)
// each collection costs more: run large saves in their own process.
export class MemoryGuard {
  private dropped = 0;

  /** @param every bytes dropped between collections (a save: 4 MiB; a restore: 8 MiB, restore.ts GC_EVERY) */
  constructor(private readonly every: number) {}

  /** Notes `bytes` of buffers that just became garbage. */
  drop(bytes: number): void {
    this.dropped += bytes;
    if (this.dropped < this.every) return;
    this.dropped = 0;
    Bun.gc(true);
  }
}
