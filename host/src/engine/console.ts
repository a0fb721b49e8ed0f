// A box's console log, as the host shows it in error messages: untrusted
// bytes (a box writes them), so only the file's last 64 KiB is read, and
// terminal control sequences are removed before a line reaches anyone's
// terminal, where they could move the cursor, retitle the window or hide text.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

/** How much of a console log's end is ever read. */
export const CONSOLE_TAIL_BYTES = 64 * 1024;

/** ESC sequences (CSI, OSC, and two-byte ones), C1 controls, and C0 controls but tab and newline. */
const CONTROL = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|[\x80-\x9f]|[\x00-\x08\x0b-\x1f\x7f]/g;

export function stripControls(text: string): string {
  return text.replace(CONTROL, "");
}

/** The last `bytes` of a file as text, or null when it cannot be read. */
export function readEnd(path: string, bytes = CONSOLE_TAIL_BYTES): string | null {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return null;
  }
  try {
    const size = fstatSync(fd).size;
    const len = Math.min(size, bytes);
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, size - len);
    const text = buf.toString("utf8");
    // A cut in the middle of a line: drop the partial first line.
    return size > len ? text.slice(text.indexOf("\n") + 1) : text;
  } finally {
    closeSync(fd);
  }
}

/** The last lines of a console log, made safe to print. */
export function consoleTailOf(path: string, lines = 20): string {
  const text = readEnd(path);
  if (text === null) return "(no console log)";
  return stripControls(text).trimEnd().split("\n").slice(-lines).join("\n") || "(console log is empty)";
}
