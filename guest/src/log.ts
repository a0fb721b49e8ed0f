// key=value lines on stderr. Callers pass metadata only: never file contents,
// process output or environment values.
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
    process.stderr.write(out + "\n");
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
