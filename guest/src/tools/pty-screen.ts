// A terminal's screen as a headless xterm.js, so a late attach can be shown
// what is on the screen now (and the scrollback) before the live output.
import { SerializeAddon } from "@xterm/addon-serialize";
import { Terminal } from "@xterm/headless";

/** Lines kept above the screen for a reattach. */
export const SCROLLBACK = 5000;

// Home and clear the attaching terminal first, so the replay is not drawn
// over whatever it showed before.
const CLEAR = "\x1b[H\x1b[2J";

export class Screen {
  private readonly term: Terminal;
  private readonly serializer = new SerializeAddon();

  constructor(cols: number, rows: number) {
    this.term = new Terminal({ cols, rows, scrollback: SCROLLBACK, allowProposedApi: true });
    this.term.loadAddon(this.serializer);
  }

  write(bytes: Uint8Array): void {
    this.term.write(bytes);
  }

  resize(cols: number, rows: number): void {
    this.term.resize(cols, rows);
  }

  /**
   * The screen as terminal output. xterm parses writes asynchronously; the
   * callback of an empty write runs once everything written before it was
   * parsed, so the snapshot holds exactly the bytes written before this call.
   */
  snapshot(): Promise<string> {
    return new Promise((resolve) => {
      this.term.write("", () => resolve(CLEAR + this.serializer.serialize({ scrollback: SCROLLBACK })));
    });
  }

  dispose(): void {
    this.term.dispose();
  }
}
