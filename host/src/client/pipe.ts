// Bigger pipes for `hutch exec` stdio. A pipe holds 64 KiB by default, so a
// bulk stream through it moves in 64 KiB reads and writes; every chunk then
// becomes a frame at every hop. Growing the pipe lets one read take a whole
// 256 KiB frame. Linux only (F_SETPIPE_SZ); elsewhere pipes keep their size.
import { fileType, libc, S_IFCHR, S_IFIFO, type Stat, statOf } from "../libc.ts";

const F_SETPIPE_SZ = 1031;
/** The default ceiling of /proc/sys/fs/pipe-max-size for an unprivileged user. */
const PIPE_BYTES = 1024 * 1024;

/** Grows the pipe on fd, if fd is one; anything else (a terminal, a file) is left alone. Best effort. `st`: fd's, when the caller has it. */
export async function growPipe(fd: number, st: Stat | null | undefined = statOf(fd)): Promise<void> {
  // No glibc (musl, static), or not Linux: the pipe keeps its size, which only costs speed.
  const c = libc();
  if (!c) return;
  if (!st || fileType(st) !== S_IFIFO) return;
  c.fcntl(fd, F_SETPIPE_SZ, PIPE_BYTES);
}

/**
 * Whether fd is /dev/null (the character device 1:3, under whatever name),
 * which reads as empty without being read: how a script, a service or
 * `ssh -n` says "no input". False where libc cannot tell; the caller reads.
 */
export function isDevNull(fd: number, st: Stat | null | undefined = statOf(fd)): boolean {
  return !!st && fileType(st) === S_IFCHR && st.rdev.major === 1 && st.rdev.minor === 3;
}
