// Output helpers: one JSON document with --json, a readable table otherwise.
import type { Box, OpProgress } from "@hutch/shared";

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
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

export function table(rows: string[][]): string {
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

export function boxLine(b: Box): string[] {
  return [b.name, b.state + (b.reason ? ` (${b.reason.split("\n")[0]})` : ""), b.engine, b.isolation, b.id];
}

export function boxDetails(b: Box): string {
  const lines = [
    ["name", b.name],
    ["id", b.id],
    ["state", b.state],
    ["desired", b.desired],
    ["engine", b.engine],
    ["isolation", b.isolation],
    ...(b.guest ? [["guest", `${b.guest.version} (${b.guest.capabilities.join(", ")})`]] : []),
    ...Object.entries(b.engineInfo ?? {}),
    ["created", b.createdAt],
    ...(b.reason ? [["reason", b.reason]] : []),
  ];
  return `${lines.map(([k, v]) => `${(`${k}:`).padEnd(14)}${v}`).join("\n")}\n`;
}
