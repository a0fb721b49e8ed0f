// Whether a verb may talk to a remote at all, decided without reading
// remotes.json. Every request verb asks this before it connects, and almost
// always the answer is "no": no --remote, no HUTCH_REMOTE, no remotes file.
// Answering it here keeps remotes.ts, and the schema library it checks the
// file with, out of those verbs' start-up (~7 ms of a ~12 ms round trip:
// scripts/bench/README.md, cli.ts).
import { exists } from "../libc.ts";
import { join } from "node:path";
import { env } from "../env.ts";

/** The name that always means the home's own daemon. */
export const LOCAL = "local";

export const remotesPath = () => join(env.configDir(), "remotes.json");

/** True when no remote can be selected: --remote/HUTCH_REMOTE says local, or names none and no remotes file exists. */
export function homeDaemonOnly(flag?: string): boolean {
  const f = flag ?? env.remote();
  return f === LOCAL || (f === undefined && !exists(remotesPath()));
}
