// Sizes as people write them on the command line ("16G", "512M") and as
// hutch prints them, for box limits on every engine.
import { HutchError } from "@hutch/shared";

const UNITS: Record<string, number> = { K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** "16G", "512M", "1T" (binary units, as qemu-img and Docker read them) to bytes. */
export function parseSize(s: string): number {
  const m = /^([1-9][0-9]*)([KMGT])$/i.exec(s.trim());
  if (!m) throw new HutchError("invalid", `size ${JSON.stringify(s)}: expected a number and a unit, like 16G or 512M`, "e.g. --disk 16G");
  return Number(m[1]) * UNITS[m[2]!.toUpperCase()]!;
}

/** Bytes as the largest whole binary unit that divides them, else MiB with one decimal. */
export function formatSize(bytes: number): string {
  for (const [u, n] of Object.entries(UNITS).reverse())
    if (bytes >= n && bytes % n === 0) return `${bytes / n}${u === "K" ? "KiB" : `${u}iB`}`;
  return `${(bytes / UNITS.M!).toFixed(1)}MiB`;
}
