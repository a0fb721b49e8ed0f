// Creating a restored file whose bytes are all at hand (one chunk or none),
// or a hard link to one restored before: what a restore does twenty thousand
// times, on its own thread or in its file writer (write-thread.ts). The job
// says everything, decided by the restore beforehand (mode, whether it can be
// created with it, owner, the extended attributes to keep), so either place
// writes the same file.
import { closeSync, constants, fchmodSync, fchownSync, linkSync, openSync, writeSync } from "node:fs";
import { setFdTimes, writeXattr } from "./fsx.ts";

/** Files are created O_EXCL|O_NOFOLLOW, in directories the restore made itself. */
export const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0);

export interface FileJob {
  kind: "file";
  path: string;
  mode: number;
  /** Created with `mode` (nothing needs a chmod afterwards), or 0600 and then chmod'ed. */
  direct: boolean;
  /** Nanoseconds since the epoch. */
  mtime: string;
  owner?: [uid: number, gid: number];
  /** Names and base64 values, already chosen by the restore's filter. */
  xattrs?: [string, string][];
}

export interface LinkJob {
  kind: "link";
  /** A restored file of the same link group, created before this job. */
  from: string;
  path: string;
}

export type WriteJob = FileJob | LinkJob;

/** Writes one job; returns how many extended attributes the destination refused. */
export function writeJob(job: WriteJob, bytes: Uint8Array): number {
  if (job.kind === "link") {
    linkSync(job.from, job.path);
    return 0;
  }
  let refused = 0;
  const fd = openSync(job.path, CREATE_FLAGS, job.direct ? job.mode : 0o600);
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    if (job.owner) fchownSync(fd, job.owner[0], job.owner[1]);
    if (!job.direct) fchmodSync(fd, job.mode);
    for (const [name, value] of job.xattrs ?? []) if (!writeXattr(job.path, name, Buffer.from(value, "base64"))) refused++;
    setFdTimes(fd, job.path, BigInt(job.mtime));
  } finally {
    closeSync(fd);
  }
  return refused;
}
