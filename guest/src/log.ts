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
    writeLine(`${out}\n`);
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
 * What the guest may write to its stderr in all: the host keeps it as the
 * box's console log, and anything a box can make the guest log must not be
 * able to fill the host's disk. Past the budget, one line says so and the
 * rest is dropped.
 */
export const LOG_BUDGET_BYTES = 8 * 1024 * 1024;
let logged = 0;

/**
 * A plain write(2) on fd 2. process.stderr would do, but creating it loads
 * node:stream and friends: about a third of the guest's start-up CPU, which
 * tcg multiplies into ~1 s of boot. It is only the fallback when fd 2 does not
 * take the line at once (a non-blocking pipe that is full).
 */
function writeLine(line: string): void {
  if (logged >= LOG_BUDGET_BYTES) return;
  logged += line.length;
  if (logged >= LOG_BUDGET_BYTES)
    line = `ts=${new Date().toISOString()} level=warn service=log msg="log budget of ${LOG_BUDGET_BYTES} bytes reached: later lines are dropped"\n`;
  try {
    writeSync(2, line);
  } catch {
    process.stderr.write(line);
  }
}
