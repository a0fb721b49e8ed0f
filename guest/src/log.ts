// key=value lines on stderr. Callers pass metadata only: never file contents,
// process output or environment values.
import { writeSync } from "node:fs";
export type Fields = Record<string, string | number | boolean | null | undefined>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  debug(msg: string, fields?: Fields): void;
}

export function createLogger(service: string, debug = false): Logger {
  const line = (level: string, msg: string, fields: Fields = {}) => {
    let out = `ts=${new Date().toISOString()} level=${level} service=${service} msg=${quote(msg)}`;
    for (const [k, v] of Object.entries(fields)) {
      if (v !== undefined) out += ` ${k}=${quote(String(v))}`;
    }
    writeLine(out + "\n");
  };
  return {
    info: (m, f) => line("info", m, f),
    warn: (m, f) => line("warn", m, f),
    error: (m, f) => line("error", m, f),
    debug: (m, f) => {
      if (debug) line("debug", m, f);
    },
  };
}

function quote(v: string): string {
  return /^[\w./:@+-]+$/.test(v) ? v : JSON.stringify(v);
}

/**
 * A plain write(2) on fd 2. process.stderr would do, but creating it loads
 * node:stream and friends: about a third of the guest's start-up CPU, which
 * tcg multiplies into ~1 s of boot. It is only the fallback when fd 2 does not
 * take the line at once (a non-blocking pipe that is full).
 */
function writeLine(line: string): void {
  try {
    writeSync(2, line);
  } catch {
    process.stderr.write(line);
  }
}
