// One stream attached to a PTY. Output is queued per attachment so a slow
// host never stalls the terminal or the other attachments, and the queue is
// bounded: past MAX_QUEUED with no credit left, the queued output is thrown
// away and the attachment is "behind". Once the host grants credit again it
// gets the current screen (as on attach) and live output from there, so a
// burst (cat of a big file) costs a redraw, not the attachment. A host that
// grants nothing for stallMs while behind (its output already sent, not
// queued behind other streams) is dropped with "failed"; it may
// attach again.
import { Chan, type ExitMsg, type MuxStream } from "@hutch/shared/wire";

export const MAX_QUEUED = 1024 * 1024;

const encoder = new TextEncoder();

export class Attachment {
  private queue: Uint8Array[] = [];
  private queued = 0;
  /** The queued snapshot, announced with a screen message when it is sent. */
  private screenMark: Uint8Array | undefined;
  private pumping = false;
  /** Output was dropped; the next thing sent must be a fresh screen. */
  private behind: boolean;
  /** A snapshot was asked for; live output queues behind it until it arrives. */
  private awaiting = 0;
  private exit: ExitMsg | undefined;
  private stall: Timer | undefined;

  constructor(
    readonly stream: MuxStream,
    private readonly snapshot: () => Promise<string>,
    private readonly onDrop: (a: Attachment) => void,
    private readonly stallMs: number,
    /** A new attach starts behind: its first output is the screen. */
    startBehind: boolean,
  ) {
    this.behind = startBehind;
    if (startBehind) this.resync();
  }

  send(bytes: Uint8Array): void {
    if (this.stream.closed || this.exit || this.behind) return;
    this.queue.push(bytes);
    this.queued += bytes.length;
    if (this.stream.window === 0 && this.queued > MAX_QUEUED) return this.fallBehind();
    this.pump();
  }

  /**
   * The host granted credit: it is reading, however slowly, whatever it
   * dropped. Any grant counts, not a finished write: a chunk as big as the
   * screen takes many small grants to go out.
   */
  credited(): void {
    clearTimeout(this.stall);
    this.stall = undefined;
  }

  /** The process exited: send what is queued, then the exit message, then close. */
  finish(exit: ExitMsg): void {
    this.exit = exit;
    this.pump();
  }

  private fallBehind(): void {
    this.queue = [];
    this.queued = 0;
    this.behind = true;
    this.awaiting = 0;
    this.stall ??= setTimeout(() => this.drop(), this.stallMs);
    // With a write in flight, run() resyncs once it completes; otherwise now.
    if (!this.pumping) this.resync();
  }

  private resync(): void {
    const ticket = ++this.awaiting;
    // Everything written to the screen before this call is in the snapshot;
    // everything after arrives through send() and queues behind it.
    this.behind = false;
    void this.snapshot().then((screen) => {
      if (ticket !== this.awaiting || this.stream.closed) return;
      this.awaiting = 0;
      const bytes = encoder.encode(screen);
      this.screenMark = bytes;
      this.queue.unshift(bytes);
      this.queued += bytes.length;
      this.pump();
    });
  }

  private drop(): void {
    this.stall = undefined;
    if (this.stream.closed) return;
    // Output of this connection still queued here has not reached the host, which cannot grant for what it
    // has not read: a busy connection is not a stuck reader. The clock starts again.
    if (this.stream.backlog > 0) {
      this.stall = setTimeout(() => this.drop(), this.stallMs);
      return;
    }
    this.stream.close({
      code: "failed",
      message: `fell more than ${MAX_QUEUED} bytes behind the terminal and granted no credit for ${this.stallMs} ms; attach again to get the screen`,
    });
    this.onDrop(this);
  }

  private pump(): void {
    if (this.pumping || this.awaiting !== 0) return;
    this.pumping = true;
    void this.run();
  }

  private async run(): Promise<void> {
    while (this.queue.length > 0 && this.awaiting === 0) {
      const chunk = this.queue.shift()!;
      this.queued -= chunk.length;
      if (chunk === this.screenMark) {
        // Tell the host these bytes are a redraw, so a recorder does not log them as output.
        this.screenMark = undefined;
        this.stream.msg({ type: "screen", bytes: chunk.length });
      }
      const ok = await this.stream.write(Chan.stdout, chunk);
      if (!ok) break;
    }
    this.pumping = false;
    if (this.stream.closed) return clearTimeout(this.stall);
    if (this.behind) return this.resync();
    if (this.exit && this.queue.length === 0 && this.awaiting === 0) {
      this.stream.msg(this.exit);
      this.stream.close();
    }
  }
}
