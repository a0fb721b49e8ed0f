// Splits an agent's stdout into lines, bounded: a line longer than MAX_LINE
// is handed on cut (and marked) and the rest of it is skipped, so a box
// printing without newlines cannot grow the daemon.
import { MAX_LINE } from "./limits.ts";

export class LineSplitter {
  private parts: Uint8Array[] = [];
  private size = 0;
  private skipping = false;
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly onLine: (line: string, truncated: boolean) => void,
    private readonly max = MAX_LINE,
  ) {}

  push(bytes: Uint8Array): void {
    let start = 0;
    for (;;) {
      const nl = bytes.indexOf(10, start);
      const end = nl < 0 ? bytes.length : nl;
      this.take(bytes.subarray(start, end));
      if (nl < 0) return;
      this.flushLine();
      start = nl + 1;
    }
  }

  /** The stream ended: a last line without a newline still counts. */
  end(): void {
    if (this.size > 0 || this.skipping) this.flushLine();
  }

  private take(chunk: Uint8Array): void {
    if (this.skipping || chunk.length === 0) return;
    const room = this.max - this.size;
    if (chunk.length > room) {
      this.parts.push(chunk.slice(0, room));
      this.size = this.max;
      this.skipping = true;
      return;
    }
    this.parts.push(chunk.slice());
    this.size += chunk.length;
  }

  private flushLine(): void {
    const buf = new Uint8Array(this.size);
    let off = 0;
    for (const p of this.parts) {
      buf.set(p, off);
      off += p.length;
    }
    const truncated = this.skipping;
    this.parts = [];
    this.size = 0;
    this.skipping = false;
    const line = this.decoder.decode(buf).replace(/\r$/, "");
    if (line.length > 0 || truncated) this.onLine(line, truncated);
  }
}
