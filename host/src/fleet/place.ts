// Where a new box goes in a fleet: among the live servers that run its engine,
// carry every label it asks for (`--on KEY=VALUE`) and, when it names one,
// are that server (`--node NAME`), the one with the most memory left once
// the boxes it runs are given theirs; then the fewest boxes; then by name, so
// the same state places the same way on every server.
import { type FleetBox, type FleetNode, HutchError } from "@hutch/shared";

export interface Want {
  engine: string;
  memoryMiB: number;
  node?: string;
  on?: Record<string, string>;
}

const labelText = (n: FleetNode) =>
  Object.entries(n.labels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(",");

export function place(nodes: FleetNode[], boxes: FleetBox[], want: Want): string {
  const fits = nodes.filter(
    (n) =>
      (want.node === undefined || n.name === want.node) &&
      (!n.engines || n.engines.includes(want.engine)) &&
      Object.entries(want.on ?? {}).every(([k, v]) => n.labels?.[k] === v),
  );
  if (fits.length === 0) {
    const asked = [
      want.node !== undefined ? `--node ${want.node}` : "",
      ...Object.entries(want.on ?? {}).map(([k, v]) => `--on ${k}=${v}`),
      `engine ${want.engine}`,
    ].filter(Boolean);
    const live = nodes.map((n) => `${n.name}${n.labels && Object.keys(n.labels).length ? ` [${labelText(n)}]` : ""}`).join(", ") || "none";
    throw new HutchError(
      "not_found",
      `no live server of the fleet takes this box (${asked.join(", ")}); live: ${live}`,
      "pick a live server or its labels (hutch cluster nodes), or drop --node/--on",
    );
  }
  const left = (n: FleetNode) => (n.memoryMiB ?? 0) - boxes.filter((b) => b.node === n.name).reduce((m, b) => m + b.memoryMiB, 0);
  const count = (n: FleetNode) => boxes.filter((b) => b.node === n.name).length;
  const best = [...fits].sort((a, b) => left(b) - left(a) || count(a) - count(b) || (a.name < b.name ? -1 : 1))[0]!;
  return best.name;
}
