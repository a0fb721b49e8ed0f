// A box's console log, as the host shows it in error messages: untrusted
// bytes (a box writes them), so only the file's last 64 KiB is read, and
// terminal control sequences are removed before a line reaches anyone's
// terminal, where they could move the cursor, retitle the window or hide text.
import { closeSync, fstatSync, openSync, readSync, statSync, truncateSync, writeFileSync } from "node:fs";

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

/**
 * Keeps a console log that its writer appends to (O_APPEND) within maxBytes:
 * once it is larger, its last CONSOLE_TAIL_BYTES go to <path>.1 (replacing
 * the previous one) and the log is emptied, so the writer's next append lands
 * at its start. A VM's root can write its serial console as fast as it likes;
 * the host keeps at most maxBytes plus one tail of it. Returns whether it trimmed.
 */
export function trimConsole(path: string, maxBytes: number): boolean {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return false;
  }
  if (size <= maxBytes) return false;
  const tail = readEnd(path) ?? "";
  writeFileSync(
    `${path}.1`,
    `[hutch: ${size} bytes of console output before this were dropped; the log is kept under ${maxBytes} bytes]\n${tail}`,
    {
      mode: 0o600,
    },
  );
  truncateSync(path, 0);
  return true;
}

/** The end of a console log and of what trimConsole kept of it before, as one text (null: neither can be read). */
export function readConsoleEnd(path: string): string | null {
  const before = readEnd(`${path}.1`);
  const now = readEnd(path);
  if (before === null && now === null) return null;
  const all = (before ?? "") + (now ?? "");
  return all.length > CONSOLE_TAIL_BYTES ? all.slice(all.indexOf("\n", all.length - CONSOLE_TAIL_BYTES) + 1) : all;
}

/** The last lines of a console log, made safe to print. */
export function consoleTailOf(path: string, lines = 20): string {
  const text = readConsoleEnd(path);
  if (text === null) return "(no console log)";
  return stripControls(text).trimEnd().split("\n").slice(-lines).join("\n") || "(console log is empty)";
}
