// Bigger pipes for `hutch exec` stdio. A pipe holds 64 KiB by default, so a
// bulk stream through it moves in 64 KiB reads and writes; every chunk then
// becomes a frame at every hop. Growing the pipe lets one read take a whole
// 256 KiB frame. Linux only (F_SETPIPE_SZ); elsewhere pipes keep their size.
import { fstatSync } from "node:fs";

const F_SETPIPE_SZ = 1031;
/** The default ceiling of /proc/sys/fs/pipe-max-size for an unprivileged user. */
const PIPE_BYTES = 1024 * 1024;

type Fcntl = (fd: number, cmd: number, arg: number) => number;
let fcntl: Fcntl | null | undefined;

async function loadFcntl(): Promise<Fcntl | null> {
  if (fcntl !== undefined) return fcntl;
  fcntl = null;
  if (process.platform !== "linux") return null;
  try {
    const { dlopen, FFIType } = await import("bun:ffi");
    const libc = dlopen("libc.so.6", { fcntl: { args: [FFIType.i32, FFIType.i32, FFIType.i32], returns: FFIType.i32 } });
    fcntl = (fd, cmd, arg) => libc.symbols.fcntl(fd, cmd, arg);
  } catch {
    // No glibc (musl, static): the pipe keeps its size, which only costs speed.
  }
  return fcntl;
}

/** Grows the pipe on fd, if fd is one; anything else (a terminal, a file) is left alone. Best effort. */
export async function growPipe(fd: number): Promise<void> {
  try {
    if (!fstatSync(fd).isFIFO()) return;
  } catch {
    return;
  }
  (await loadFcntl())?.(fd, F_SETPIPE_SZ, PIPE_BYTES);
}
