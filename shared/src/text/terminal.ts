// Text written by someone else (another user's annotation, an agent's message,
// a box's output) is shown on the reader's terminal, which obeys any control
// sequence in it: an OSC 52 writes the clipboard, ESC c clears the screen, a
// bidi override reorders what the eye reads (Trojan Source). So every human
// renderer passes untrusted text through here, and the log keeps what was sent.
// The escaped form is ASCII, reads as the code point it stands for, and a
// backslash that would read as the start of one is doubled (see README.md).

/** Escaped: C0 controls (tab and newline only when asked), DEL, C1 controls, bidi embeddings/overrides/isolates. */
const CONTROL = "\\x00-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069";
// A run of backslashes, or one control character.
const TOKEN = new RegExp(`(\\\\+)|[${CONTROL}]`, "g");
const IS_CONTROL = new RegExp(`^[${CONTROL}]$`);

const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");

export interface TerminalTextOptions {
  /** Escape newlines and tabs too: for a field that must stay on its line (a path, a name, an id). */
  oneLine?: boolean;
}

/**
 * Untrusted text made safe to print on a terminal: every control character
 * (C0 but tab and newline, DEL, C1) and every bidi embedding, override and
 * isolate is written as `\xHH` (up to U+00FF) or `\uHHHH`. Nothing else
 * changes, but for a run of backslashes right before an `x`, a `u` or an
 * escaped character: it is doubled, so the output reads back one way only.
 */
export function terminalText(text: string, options: TerminalTextOptions = {}): string {
  const escaped = (c: string | undefined) => c !== undefined && IS_CONTROL.test(c) && (options.oneLine || (c !== "\n" && c !== "\t"));
  return text.replace(TOKEN, (m: string, run: string | undefined, at: number) => {
    if (run) {
      const next = text[at + run.length];
      return next === "x" || next === "u" || escaped(next) ? run + run : run;
    }
    if (!escaped(m)) return m;
    const n = m.charCodeAt(0);
    return n <= 0xff ? `\\x${hex(n, 2)}` : `\\u${hex(n, 4)}`;
  });
}

/**
 * JSON for a terminal: `JSON.stringify`, with the characters it leaves raw
 * (DEL, C1, bidi controls, U+2028/U+2029) written as `\uHHHH`. Those only
 * occur inside JSON strings, so the document parses to the same value.
 */
export function terminalJson(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(
    /[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g,
    (c) => `\\u${hex(c.charCodeAt(0), 4)}`,
  );
}

/**
 * A terminal's output as the text it printed: the sequences programs print
 * to colour and move the cursor (CSI; OSC, DCS, APC, PM and SOS strings;
 * two-character ESC sequences, in their 7- and 8-bit forms) are dropped, and
 * a carriage return (alone or before a newline) is a newline, so nothing
 * printed can hide behind what overwrote it. Other controls stay: pass the
 * result through terminalText (or a renderer that does) before showing it.
 */
export function stripTerminal(s: string): string {
  return s
    .replace(/(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]/g, "")
    .replace(/(?:\x1b[\]P_^X]|[\x9d\x90\x9f\x9e\x98])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)/g, "")
    .replace(/\x1b[ -/]*[0-~]/g, "")
    .replace(/\r*\n|\r+/g, "\n");
}
