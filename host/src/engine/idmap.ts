// The host identity of a box when the daemon runs as root: a block of
// subordinate ids of its own (65,536 a box, as rootless container engines and
// incus's isolated idmaps give each container), so no process of a box is
// ever host root, two boxes never share an owner, and RLIMIT-style per-user
// accounting sees each box apart. The block comes from /etc/subuid and
// /etc/subgid ("hutch:BASE:COUNT", as usermod --add-subuids writes it) or, when
// there is no such entry, from a default range far above the ids people and
// distributions hand out. A box keeps its block for life (identity.json in its
// directory, beside the disk whose files it owns); the block is picked from a
// hash of the box id, so two homes on one host rarely pick the same one, and
// one home never does.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";

/** Ids per box: a whole user namespace's worth, though a box maps only its user. */
export const BLOCK = 65_536;
/** The uid (and gid) a box's processes have inside it. */
export const BOX_USER = 1000;

/** Used when /etc/subuid has no "hutch" entry: 15,258 blocks from 1,000,000,000 (below 2^31, which tools treat as signed). */
export const DEFAULT_RANGE = { base: 1_000_000_000, count: 1_000_000_000 } as const;

export interface IdRange {
  base: number;
  count: number;
  /** Where the range came from, for doctor. */
  source: string;
}

export interface BoxIdentity {
  /** The host uid and gid the box user (1000) maps to. */
  uid: number;
  gid: number;
  /** The box's block: its ids are base + block * BLOCK onwards. */
  block: number;
}

/** The "hutch" entry of a subid file, or null. */
export function parseSubid(text: string, owner = "hutch"): { base: number; count: number } | null {
  for (const line of text.split("\n")) {
    const [name, base, count] = line.trim().split(":");
    if (name !== owner || base === undefined || count === undefined) continue;
    const b = Number(base);
    const c = Number(count);
    if (Number.isInteger(b) && Number.isInteger(c) && b > 0 && c >= BLOCK && b + c <= 2 ** 32 - 1) return { base: b, count: c };
  }
  return null;
}

/** The uid and gid ranges boxes draw from on this host. */
export function hostRanges(etc = "/etc"): { uid: IdRange; gid: IdRange } {
  const read = (file: string): IdRange => {
    const path = join(etc, file);
    const found = existsSync(path) ? parseSubid(readFileSync(path, "utf8")) : null;
    return found ? { ...found, source: `${path} (hutch)` } : { ...DEFAULT_RANGE, source: `default (no "hutch" entry in ${path})` };
  };
  return { uid: read("subuid"), gid: read("subgid") };
}

/** FNV-1a of the box id: where the search for a free block starts. */
function startSlot(boxId: string, slots: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < boxId.length; i++) h = Math.imul(h ^ boxId.charCodeAt(i), 0x01000193) >>> 0;
  return h % slots;
}

/**
 * Picks a free block for a new box: the first slot not taken by `taken`,
 * searching from the box id's hash. Pure, so the allocation is table-tested.
 */
export function pickSlot(boxId: string, slots: number, taken: ReadonlySet<number>): number {
  if (slots < 1)
    throw new HutchError(
      "config",
      "the subordinate id range holds no whole block of 65536 ids",
      "give hutch a larger range in /etc/subuid and /etc/subgid (hutch:BASE:COUNT)",
    );
  const start = startSlot(boxId, slots);
  for (let i = 0; i < slots; i++) {
    const slot = (start + i) % slots;
    if (!taken.has(slot)) return slot;
  }
  throw new HutchError("unavailable", `all ${slots} id blocks are in use`, "delete boxes you no longer need: hutch box list");
}

export const IDENTITY_FILE = "identity.json";

/** A box's identity as written at its creation, or null. */
export function readIdentityFile(dir: string): BoxIdentity | null {
  try {
    const id = JSON.parse(readFileSync(join(dir, IDENTITY_FILE), "utf8")) as BoxIdentity;
    return Number.isInteger(id.uid) && Number.isInteger(id.gid) && Number.isInteger(id.block) ? id : null;
  } catch {
    return null;
  }
}

/** The box's identity, allocated (and written beside its files) on first use. Idempotent. */
export function boxIdentity(boxesDir: string, boxId: string, ranges = hostRanges()): BoxIdentity {
  const dir = join(boxesDir, boxId);
  const have = readIdentityFile(dir);
  if (have) return have;
  const identity = allocateIdentity(boxesDir, boxId, ranges);
  writeIdentityFile(dir, identity);
  return identity;
}

export function writeIdentityFile(dir: string, identity: BoxIdentity): void {
  writeFileSync(join(dir, IDENTITY_FILE), `${JSON.stringify(identity)}\n`, { mode: 0o600 });
}

/**
 * A free block for a box that has none here yet, not written anywhere: a box
 * carried in from another server (fleet/carry.ts) gets its identity before its
 * directory is in place.
 */
export function allocateIdentity(boxesDir: string, boxId: string, ranges = hostRanges()): BoxIdentity {
  const slots = Math.floor(Math.min(ranges.uid.count, ranges.gid.count) / BLOCK);
  const taken = new Set<number>();
  for (const other of existsSync(boxesDir) ? readdirSync(boxesDir) : []) {
    const id = other === boxId ? null : readIdentityFile(join(boxesDir, other));
    if (id) taken.add((id.uid - BOX_USER - ranges.uid.base) / BLOCK);
  }
  const slot = pickSlot(boxId, slots, taken);
  return {
    uid: ranges.uid.base + slot * BLOCK + BOX_USER,
    gid: ranges.gid.base + slot * BLOCK + BOX_USER,
    block: slot,
  };
}
