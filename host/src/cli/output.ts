// Output helpers: one JSON document with --json, a readable table otherwise.
import type { Box } from "@hutch/shared";

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
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
