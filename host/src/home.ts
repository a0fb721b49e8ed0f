// $HUTCH_HOME holds every box, session log, stub, egress record and the key
// that seals secrets: it must be one user's alone. The daemon runs under umask
// 077, so everything it creates there is 0600 / 0700, and a home that group or
// others can reach, or that another user owns, is refused with the command
// that fixes it (as keys/secrets.key is). The CLI checks the same before it
// talks to a daemon or starts one, so the refusal reaches the person typing
// and no socket another user could have planted in an open home is used.
// On Windows there are no mode bits to check.
import { chmodSync, lstatSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared/base";
import { HOME_FILES } from "./paths.ts";

/** What a shell needs to take a path as one word. */
const shellWord = (p: string) => (/^[\w@%+=:,./-]+$/.test(p) ? p : `'${p.replaceAll("'", "'\\''")}'`);

/** Refuses a home open to group or others, or not owned by this user. A missing home passes (the daemon makes it 0700). */
export function checkHome(home: string): void {
  if (process.platform === "win32") return;
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(home);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw new HutchError(
      "config",
      `cannot read $HUTCH_HOME ${home}: ${(err as Error).message}`,
      "point HUTCH_HOME (or --home) at a directory of your own",
    );
  }
  if (!st.isDirectory())
    throw new HutchError("config", `$HUTCH_HOME ${home} is not a directory`, "point HUTCH_HOME (or --home) at a directory of your own");
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new HutchError(
      "config",
      `$HUTCH_HOME ${home} belongs to uid ${st.uid}, not to you (uid ${uid}); its owner could read and change every box, session log and secret in it`,
      `use a home of your own (--home DIR), or take this one over: sudo chown -R "$(id -un)" ${shellWord(home)}`,
    );
  }
  const mode = st.mode & 0o777;
  if (mode & 0o077) {
    throw new HutchError(
      "config",
      `$HUTCH_HOME ${home} is open to other users (mode ${mode.toString(8).padStart(3, "0")}): they could read or change every box, session log and secret in it`,
      `restrict it: chmod 700 ${shellWord(home)}`,
    );
  }
}

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
