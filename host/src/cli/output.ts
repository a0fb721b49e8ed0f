// Output helpers: one JSON document with --json, a readable table otherwise.
// Names, labels, reasons and ids can come from other users or from a box:
// tables and details escape every cell (terminalText), JSON its raw
// C1 and bidi controls (terminalJson), so neither can drive the terminal.
import type { Box, OpProgress } from "@hutch/shared";
import { terminalJson, terminalText } from "@hutch/shared/text";

/** A field that must stay on its line. */
export const cell = (s: string): string => terminalText(s, { oneLine: true });

/**
 * Writes to stdout through Bun's file sink and waits until it is written.
 * A request verb's one answer goes this way: process.stdout is a node:stream
 * Bun builds on first use (~8 ms, README.md, start-up), more than the request
 * itself. The sink appends, to a redirected file too.
 */
export async function print(text: string): Promise<void> {
  const out = Bun.stdout.writer();
  out.write(text);
  await out.flush();
}

/**
 * Writes a long run of output (a session's log) to stdout as it comes, each
 * piece written before the next: process.stdout.write only queues what a
 * pipe cannot take yet, and the CLI's process.exit drops that queue (a
 * `session log` piped to a slow reader lost all but its first 64 KiB). False
 * once the reader is gone (a closed pipe): the caller stops, as `cat` does.
 */
export function outputWriter(): (text: string) => Promise<boolean> {
  const sink = Bun.stdout.writer();
  let open = true;
  return async (text) => {
    if (!open) return false;
    try {
      const written = sink.write(text);
      if (written instanceof Promise) await written;
      await sink.flush();
    } catch {
      open = false;
    }
    return open;
  };
}

export function printJson(value: unknown): void {
  process.stdout.write(`${terminalJson(value, 2)}\n`);
}

/**
 * Progress of a CLI-side verb (offload, bring-back) under --json: one NDJSON
 * `step` line per step on stderr, so stdout keeps its one document (as
 * `docker buildx --progress=rawjson` does) and an IDE can show the steps.
 */
export function jsonSteps(): (title: string) => void {
  let n = 0;
  return (title) => {
    const line: OpProgress = { type: "step", n: ++n, title };
    process.stderr.write(`${JSON.stringify(line)}\n`);
  };
}

export function table(cells: string[][]): string {
  const rows = cells.map((r) => r.map(cell));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return `${rows
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n")}\n`;
}

/** The disk an asleep box's state takes, e.g. "212 MiB on disk". */
function sleepText(s: NonNullable<Box["sleep"]>): string {
  const mib = s.bytes / 1024 / 1024;
  return `${mib >= 10 ? Math.round(mib) : mib.toFixed(1)} MiB on disk`;
}

export function boxLine(b: Box): string[] {
  // table() escapes the cells.
  const state = b.sleep ? `asleep (${sleepText(b.sleep)})` : b.state;
  return [b.name, state + (b.reason ? ` (${b.reason.split("\n")[0]})` : ""), b.engine, b.isolation, b.id];
}

export function boxDetails(b: Box): string {
  const lines = [
    ["name", b.name],
    ["id", b.id],
    ["state", b.state],
    ["desired", b.desired],
    ...(b.sleep
      ? [["sleep", `${sleepText(b.sleep)}${b.sleep.keeps === "memory" ? ", programs kept" : ", programs stopped (agents resume)"}`]]
      : []),
    ...(b.autoSleep
      ? [
          [
            "auto-sleep",
            [
              b.autoSleep.sleepAfterS !== null ? `after ${b.autoSleep.sleepAfterS}s idle` : "",
              b.autoSleep.maxAwakeS !== null ? `after ${b.autoSleep.maxAwakeS}s awake` : "",
            ]
              .filter(Boolean)
              .join(", "),
          ],
        ]
      : []),
    ...(b.server ? [["server", b.server]] : []),
    ...(b.restart ? [["restart", b.restart]] : []),
    ...(b.checkpoint
      ? [
          [
            "checkpoint",
            `every ${b.checkpoint.everyS}s${b.checkpoint.last ? `; latest ${b.checkpoint.last.snapshot} at ${b.checkpoint.last.at}` : "; none yet"}`,
          ],
        ]
      : []),
    ["engine", b.engine],
    ["isolation", b.isolation],
    ...(b.guest ? [["guest", `${b.guest.version} (${b.guest.capabilities.join(", ")})`]] : []),
    ...Object.entries(b.engineInfo ?? {}),
    ["created", b.createdAt],
    ...(b.reason ? [["reason", b.reason]] : []),
  ];
  return `${lines.map(([k, v]) => `${(`${k}:`).padEnd(14)}${terminalText(v ?? "")}`).join("\n")}\n`;
}
