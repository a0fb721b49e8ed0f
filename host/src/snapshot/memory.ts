// Keeping a save's or a restore's memory flat. The buffers zstd and the
// cipher return live outside the JavaScript heap and do not count as its
// growth, so the collector let 100–200 MB of dead ones pile up before it ran
// (peak RSS 180–330 MB on the bench tree), and the allocator kept those pages
// afterwards. A full collection after every EVERY bytes of dropped buffers
// keeps dead ones from piling up in the first place: on the bench tree, peak
// RSS 105–109 MB against 134–180 MB without, for ~7 ms a collection (~0.45 s
// for 640 MB). An asynchronous collection (Bun.gc(false)) costs nothing but
// left the peak at 145–180 MB. In a process with a bigger heap (the daemon)
// each collection costs more: run large saves in their own process.
export class MemoryGuard {
  private dropped = 0;

  /** @param every bytes dropped between collections (a save: 16 MiB; a restore, whose dead buffers are mostly short-lived plaintext: 32 MiB) */
  constructor(private readonly every: number) {}

  /** Notes `bytes` of buffers that just became garbage. */
  drop(bytes: number): void {
    this.dropped += bytes;
    if (this.dropped < this.every) return;
    this.dropped = 0;
    Bun.gc(true);
  }
}
