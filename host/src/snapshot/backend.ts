// The names a snapshot backend accepts, checked here, so no caller can make a
// backend touch a path of its choosing: content-addressed kinds take 64
// lowercase hex digits, locks a short word. The Backend interface itself is
// in store/snapshot-backend.ts, with the other storage interfaces.

import { randomUUID } from "node:crypto";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { processAlive } from "../procs.ts";
import { invalid } from "./errors.ts";

export type { Backend, ObjectInfo, ObjectKind, Range } from "../store/snapshot-backend.ts";
import type { Backend, ObjectKind } from "../store/snapshot-backend.ts";

const HEX64 = /^[0-9a-f]{64}$/;
const LOCK = /^[a-z][a-z0-9-]{0,31}$/;

/** Throws unless `name` may be an object of `kind`. */
export function checkName(kind: ObjectKind, name: string): void {
  const ok = kind === "config" ? name === "config" : kind === "locks" ? LOCK.test(name) : HEX64.test(name);
  if (!ok) throw invalid(`${JSON.stringify(name)} is not a valid name for a ${kind} object`, undefined, `${kind}/${name}`);
}

/**
 * A new path in a backend's staging directory. Names start with the pid, so
 * a local backend can sweep the files of processes that died mid-write.
 */
export function stagingFile(backend: Backend): string {
  return join(backend.stagingDir(), `${process.pid}-${randomUUID()}`);
}

/** Removes the staging files of processes that died mid-write (named <pid>-…, see stagingFile). */
export function sweepStaging(dir: string): void {
  for (const name of readdirSync(dir)) {
    const pid = Number.parseInt(name.split("-")[0] ?? "", 10);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processAlive(pid))
      rmSync(join(dir, name), { recursive: true, force: true });
  }
}
