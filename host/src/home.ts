// $HUTCH_HOME holds every box, session log, stub, egress record and the key
// that seals secrets: it must be one user's alone. The daemon runs under umask
// 077, so everything it creates there is 0600 / 0700, and a home that group or
// others can reach, or that another user owns, is refused with the command
// that fixes it (as keys/secrets.key is). The CLI checks the same before it
// talks to a daemon or starts one, so the refusal reaches the person typing
// and no socket another user could have planted in an open home is used.
// On Windows there are no mode bits to check. The check runs before every
// request the CLI sends, so it asks libc (libc.ts), not node:fs, whose import
// alone costs the CLI ~4 ms; node:fs is loaded only where libc is not there.
import { HutchError } from "@hutch/shared/base";
import { fileType, nodeFs, S_IFDIR, type Stat, statOf } from "./libc.ts";

/** What a shell needs to take a path as one word. */
const shellWord = (p: string) => (/^[\w@%+=:,./-]+$/.test(p) ? p : `'${p.replaceAll("'", "'\\''")}'`);

/** Refuses a home open to group or others, or not owned by this user. A missing home passes (the daemon makes it 0700). */
export function checkHome(home: string): void {
  if (process.platform === "win32") return;
  let st: Pick<Stat, "mode" | "uid"> | null | undefined = statOf(home);
  if (st === undefined) {
    try {
      st = nodeFs().statSync(home);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT")
        throw new HutchError(
          "config",
          `cannot read $HUTCH_HOME ${home}: ${(err as Error).message}`,
          "point HUTCH_HOME (or --home) at a directory of your own",
        );
      st = null;
    }
  }
  if (st === null) return;
  if (fileType(st) !== S_IFDIR)
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
