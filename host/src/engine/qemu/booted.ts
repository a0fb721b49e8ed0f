// Booted states: a VM of one shape booted once, put to sleep, and kept, so
// the first start of every later box of that shape loads the saved state
// instead of booting (under tcg a boot is ~12 s of CPU, a load ~2 s): what
// E2B's template snapshots and Firecracker's snapshot restore do.
//
// The one hard problem is that a state is only right for a box whose VM has
// the very same devices and guest: a key over the box's own command line
// with what names the box taken out (its id, name, directory, home, and the
// uid QEMU drops to), the image build it boots (its manifest) and the disk's
// size. Everything else in the command line (memory, vCPUs, the guest and
// agent disks, kernel arguments) is in the key, so a box of another shape
// never gets the state. And every copy of one state starts with the same
// memory, so only where the VM has a vmgenid device (its id changes on each
// load and the kernel reseeds its random numbers) is a state used at all.
//
// A state is made for a shape once a second box of it has booted (a shape
// used once costs no extra boot): a box booted for it in the background
// (box/pool.ts), put to sleep, its state and disk moved here; written in a
// staging directory and renamed, so a reader never sees half of one, and the
// first of two daemons making the same key keeps its own. Each is immutable
// once there; a state QEMU will not load is removed; the MAX_BOOTED most
// recently used stay.
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { pidDir, sweepPidDirs } from "../../procs.ts";
import { imagesDir } from "../../image/store.ts";

/** Where a home keeps them: beside the images they boot. */
export const BOOTED = ".booted";
/** At most this many are kept (each is the VM's touched memory, ~140 MB for 1 GiB): the least recently used go first. */
export const MAX_BOOTED = 6;
const STAGING_PREFIX = ".staging-";
const SEEN_PREFIX = ".seen-";
/** A shape's mark is forgotten after this long without a second box: a shape used once a week is not worth a state. */
const SEEN_FOR_MS = 7 * 24 * 3600_000;
const FILES = { state: "sleep.state", disk: "disk.qcow2", meta: "meta.json" } as const;

/** Who a command line was made for: what the key takes out of it. */
export interface BootedFor {
  home: string;
  dir: string;
  id: string;
  name: string;
}

/** A kept state: its files, and what it was made from. */
export interface BootedState {
  key: string;
  dir: string;
  state: string;
  disk: string;
  made: string;
}

/**
 * The command line with the box's own names put as placeholders: two boxes
 * whose lines are equal after this have the same devices and guest.
 */
export function normalizedArgv(argv: string[], who: BootedFor): string[] {
  return argv.map((a, i) => {
    const flag = argv[i - 1];
    if (flag === "-name") return "@NAME@";
    if (flag === "-runas") return "@RUNAS@";
    let s = a.replaceAll(who.dir, "@DIR@").replaceAll(who.home, "@HOME@").replaceAll(who.id, "@ID@");
    if (flag === "-append") s = s.replace(/(^| )hutch\.box=\S+/, "$1hutch.box=@NAME@");
    return s;
  });
}

/**
 * The key a box of this command line, image build and disk size keeps its
 * booted state under; null when its VM has no vmgenid (booted.ts' header).
 */
export function bootedKey(argv: string[], who: BootedFor, manifest: string, disk: string | undefined): string | null {
  if (!argv.some((a) => a.startsWith("vmgenid"))) return null;
  const h = createHash("sha256");
  h.update(
    JSON.stringify({
      v: 1,
      argv: normalizedArgv(argv, who),
      image: createHash("sha256").update(manifest).digest("hex"),
      disk: disk ?? null,
    }),
  );
  return h.digest("hex").slice(0, 32);
}

const storeDir = (home: string) => join(imagesDir(home), BOOTED);

/** The state kept under `key`, whole, or null. Marks it used (the prune keeps the most recently used). */
export function findBooted(home: string, key: string): BootedState | null {
  const dir = join(storeDir(home), key);
  const files = { state: join(dir, FILES.state), disk: join(dir, FILES.disk), meta: join(dir, FILES.meta) };
  try {
    const meta = JSON.parse(readFileSync(files.meta, "utf8")) as { key?: unknown; made?: unknown };
    if (meta.key !== key || !existsSync(files.state) || !existsSync(files.disk)) return null;
    const now = new Date();
    utimesSync(dir, now, now);
    return { key, dir, state: files.state, disk: files.disk, made: typeof meta.made === "string" ? meta.made : "" };
  } catch {
    return null;
  }
}

/**
 * Moves an asleep box's state and disk into the store under `key` (the box
 * keeps neither). False when a state of that key was there already (made by
 * another box meanwhile): this one's files are removed, that one stays.
 */
export function keepBooted(home: string, key: string, box: { dir: string; name: string }, files: { state: string; disk: string }): boolean {
  const parent = storeDir(home);
  const staging = pidDir(parent, STAGING_PREFIX);
  try {
    moveFile(files.state, join(staging, FILES.state));
    moveFile(files.disk, join(staging, FILES.disk));
    writeFileSync(join(staging, FILES.meta), JSON.stringify({ key, made: new Date().toISOString(), from: box.name }));
    if (existsSync(join(parent, key))) return false;
    try {
      renameSync(staging, join(parent, key));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOTEMPTY" || code === "EEXIST") return false;
      throw err;
    }
    rmSync(join(parent, `${SEEN_PREFIX}${key}`), { force: true });
    pruneBooted(home);
    return true;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** A rename, or a copy where the two are on different filesystems (a store linked elsewhere). */
function moveFile(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
    copyFileSync(from, to);
    rmSync(from, { force: true });
  }
}

/**
 * Whether a box of this key booted before (its first start found no state):
 * true the second time, when a state is worth making; the first time it
 * leaves a mark and says false, so a shape used once costs no second boot.
 */
export function seenBooted(home: string, key: string): boolean {
  const mark = join(storeDir(home), `${SEEN_PREFIX}${key}`);
  if (existsSync(mark)) return true;
  try {
    ensureBootedStore(home);
    writeFileSync(mark, "");
  } catch {
    // no mark: the next box of the shape asks again
  }
  return false;
}

/** Removes a state (QEMU would not load it); the next box of its shape boots, and a new one is made. */
export function dropBooted(home: string, key: string): void {
  rmSync(join(storeDir(home), key), { recursive: true, force: true });
}

/** Keeps the MAX_BOOTED most recently used states; the rest, and staging a killed daemon left, go. Returns the keys removed. */
export function pruneBooted(home: string, max = MAX_BOOTED): string[] {
  const parent = storeDir(home);
  sweepPidDirs(parent, STAGING_PREFIX);
  let names: string[];
  try {
    names = readdirSync(parent).filter((n) => !n.startsWith("."));
  } catch {
    return [];
  }
  const used = names
    .map((n) => {
      try {
        return { n, at: statSync(join(parent, n)).mtimeMs };
      } catch {
        return { n, at: 0 };
      }
    })
    .sort((a, b) => b.at - a.at);
  const gone = used.slice(max).map((u) => u.n);
  for (const n of gone) rmSync(join(parent, n), { recursive: true, force: true });
  for (const n of readdirSync(parent).filter((x) => x.startsWith(SEEN_PREFIX))) {
    try {
      if (Date.now() - statSync(join(parent, n)).mtimeMs > SEEN_FOR_MS) rmSync(join(parent, n), { force: true });
    } catch {
      // gone meanwhile
    }
  }
  return gone;
}

/** Each kept state's key and bytes, for `hutch doctor`. */
export function listBooted(home: string): { key: string; bytes: number }[] {
  const parent = storeDir(home);
  let names: string[];
  try {
    names = readdirSync(parent).filter((n) => !n.startsWith("."));
  } catch {
    return [];
  }
  return names.map((key) => {
    let bytes = 0;
    for (const f of [FILES.state, FILES.disk]) {
      try {
        bytes += statSync(join(parent, key, f)).blocks * 512;
      } catch {
        // half-removed: counted as what is left
      }
    }
    return { key, bytes };
  });
}

/** Makes the store's directory (0700: the states are VMs' memory). */
export function ensureBootedStore(home: string): void {
  mkdirSync(storeDir(home), { recursive: true, mode: 0o700 });
}
