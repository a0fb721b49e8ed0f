// Hand-made fleet state for the tests of placement and the reconcile loop.
import type { FleetNode } from "@hutch/shared";

/** A live node as its heartbeat entry shows it. */
export const fleetNode = (
  name: string,
  memoryMiB = 8192,
  labels: Record<string, string> = {},
  engines = ["process", "qemu"],
): FleetNode => ({
  name,
  version: "0",
  listen: `https://127.0.0.1:1/${name}`,
  instance: name,
  started: 0,
  seen: 0,
  memoryMiB,
  cpus: 2,
  engines,
  labels,
});
