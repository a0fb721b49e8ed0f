// What older hutch versions left open in a home, tightened by the daemon at
// start (the check that a home is one user's alone is ../home.ts, which the
// CLI runs too).
import { chmodSync, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { HOME_FILES } from "../paths.ts";

/**
 * What older hutch versions left looser than 0600 / 0700 (the database and
 * its -wal/-shm were 0644): the daemon's own state files and the directories
 * holding boxes and images. Box contents (workspace, home) keep the modes the
 * box gave them; the guest binary and the agents cache are shared with boxes
 * and set by their own code.
 */
const OWN_FILES = [HOME_FILES.log, HOME_FILES.lock, "accel.json"];
const OWN_DIRS = [HOME_FILES.boxes, HOME_FILES.images];

/** Tightens hutch's own files in a home made by an older version; returns what it could not (path: reason). */
export function tightenHome(home: string): string[] {
  const failed: string[] = [];
  const restrict = (path: string, want: number) => {
    try {
      const st = lstatSync(path);
      // Never through a symlink, and only what is ours to change.
      if (st.isSymbolicLink() || (st.mode & 0o777 & ~want) === 0) return;
      chmodSync(path, st.mode & want);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") failed.push(`${path}: ${(err as Error).message}`);
    }
  };
  for (const name of OWN_FILES) restrict(join(home, name), 0o600);
  for (const name of OWN_DIRS) {
    const dir = join(home, name);
    restrict(dir, 0o700);
    let children: string[] = [];
    try {
      children = readdirSync(dir);
    } catch {
      continue;
    }
    for (const child of children) restrict(join(dir, child), 0o700);
  }
  return failed;
}
