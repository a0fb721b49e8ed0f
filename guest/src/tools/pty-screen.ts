// A terminal's screen as a headless xterm.js, so a late attach can be shown
// what is on the screen now (and the scrollback) before the live output.
//
// xterm parses asynchronously and throws ("write data discarded, use flow
// control") once more than 50 MB wait to be parsed; a burst such as
// `yes | head -c 120M` outruns the parser, and that throw in the PTY's data
// callback took PID 1 and the box with it. Bun cannot pause reading a PTY,
// so the screen keeps its own bounded backlog in front of xterm instead: at
// most PARSE_AHEAD bytes are handed to xterm at once, at most BACKLOG_MAX
// more wait here, and past that the oldest waiting bytes are not drawn
// (counted in `dropped`). The newest output always reaches the screen, so
// after a flood it shows how the flood ended; the terminal's own output to
// attachments is not touched by this.
import { SerializeAddon } from "@xterm/addon-serialize";
import { Terminal } from "@xterm/headless";

/** Lines kept above the screen for a reattach. */
export const SCROLLBACK = 5000;
/** Most bytes handed to xterm and not yet parsed. */
export const PARSE_AHEAD = 4 * 1024 * 1024;
/** Most bytes waiting behind those; the oldest beyond it are dropped from the screen. */
export const BACKLOG_MAX = 8 * 1024 * 1024;

// Home and clear the attaching terminal first, so the replay is not drawn
// over whatever it showed before.
const CLEAR = "\x1b[H\x1b[2J";

/** Output waiting for xterm, or a snapshot waiting for everything written before it. */
type Waiting = Uint8Array | (() => void);

export class Screen {
  private readonly term: Terminal;
  private readonly serializer = new SerializeAddon();
  private backlog: Waiting[] = [];
  private head = 0;
  private backlogBytes = 0;
  private parsing = 0;
  /** Output bytes the screen skipped because it fell too far behind. */
  dropped = 0;

  constructor(cols: number, rows: number) {
    this.term = new Terminal({ cols, rows, scrollback: SCROLLBACK, allowProposedApi: true });
    this.term.loadAddon(this.serializer);
  }

  write(bytes: Uint8Array): void {
    this.backlog.push(bytes);
    this.backlogBytes += bytes.length;
    while (this.backlogBytes > BACKLOG_MAX) {
      const oldest = this.backlog[this.head++]!;
      if (typeof oldest === "function") {
        // Everything before it is in xterm already or dropped: it may go now.
        this.term.write("", oldest);
        continue;
      }
      this.backlogBytes -= oldest.length;
      this.dropped += oldest.length;
    }
    this.feed();
  }

  resize(cols: number, rows: number): void {
    this.term.resize(cols, rows);
  }

  /**
   * The screen as terminal output. It waits behind the backlog, and the
   * callback of an empty xterm write runs once everything written before it
   * was parsed, so the snapshot holds the bytes written before this call
   * (less any the screen dropped).
   */
  snapshot(): Promise<string> {
    return new Promise((resolve) => {
      this.backlog.push(() => resolve(CLEAR + this.serializer.serialize({ scrollback: SCROLLBACK })));
      this.feed();
    });
  }

  dispose(): void {
    this.backlog = [];
    this.head = 0;
    this.term.dispose();
  }

  private feed(): void {
    while (this.head < this.backlog.length && this.parsing < PARSE_AHEAD) {
      const next = this.backlog[this.head++]!;
      if (typeof next === "function") {
        this.term.write("", next);
        continue;
      }
      this.backlogBytes -= next.length;
      this.parsing += next.length;
      this.term.write(next, () => {
        this.parsing -= next.length;
        this.feed();
      });
    }
    // Compact now and then so the array does not grow with everything ever written.
    if (this.head > 1024 || this.head === this.backlog.length) {
      this.backlog = this.backlog.slice(this.head);
      this.head = 0;
    }
  }
}
