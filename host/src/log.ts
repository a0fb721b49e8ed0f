// Human logs: key=value (or JSON) lines on stderr. Machine state goes to the
// database and the API, never here. Never pass a secret as a field.
export type Level = "debug" | "info" | "warn" | "error";
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

let threshold: Level = "info";
let format: "text" | "json" = "text";
let sink: (line: string) => void = (line) => process.stderr.write(`${line}\n`);

export function configureLog(opts: { level?: string; format?: string; sink?: (line: string) => void }): void {
  if (opts.level && opts.level in ORDER) threshold = opts.level as Level;
  if (opts.format === "json" || opts.format === "text") format = opts.format;
  if (opts.sink) sink = opts.sink;
}

function quote(v: unknown): string {
  const s = v instanceof Error ? v.message : typeof v === "string" ? v : JSON.stringify(v);
  return /^[^\s"=]*$/.test(s ?? "") ? String(s) : JSON.stringify(s);
}

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

function make(base: Record<string, unknown>): Logger {
  const emit = (level: Level, msg: string, fields: Record<string, unknown> = {}) => {
    if (ORDER[level] < ORDER[threshold]) return;
    const all = { ...base, ...fields };
    const at = new Date().toISOString();
    if (format === "json") {
      sink(
        JSON.stringify({
          at,
          level,
          msg,
          ...Object.fromEntries(Object.entries(all).map(([k, v]) => [k, v instanceof Error ? v.message : v])),
        }),
      );
      return;
    }
    const kv = Object.entries(all)
      .map(([k, v]) => `${k}=${quote(v)}`)
      .join(" ");
    sink(`${at} ${level.toUpperCase().padEnd(5)} ${msg}${kv ? ` ${kv}` : ""}`);
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (f) => make({ ...base, ...f }),
  };
}

export const log = { create: (fields: { service: string } & Record<string, unknown>) => make(fields) };
