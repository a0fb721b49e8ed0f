// Who is listening at the other end of a connected unix socket: SO_PEERCRED,
// which the kernel fills in when the listener called listen(2), with its pid
// as seen from the caller's pid namespace (the host pid of a box's PID 1).
// Bun does not expose it, so it is read with getsockopt(2) through libc.
// Linux only.
import { dlopen, FFIType, ptr } from "bun:ffi";

const SOL_SOCKET = 1;
const SO_PEERCRED = 17;

export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

type GetSockOpt = (fd: number, level: number, name: number, value: Int32Array, len: Uint32Array) => number;
let getsockopt: GetSockOpt | null | undefined;

function load(): GetSockOpt | null {
  if (getsockopt !== undefined) return getsockopt;
  getsockopt = null;
  if (process.platform !== "linux") return null;
  try {
    const { i32 } = FFIType;
    const libc = dlopen("libc.so.6", { getsockopt: { args: [i32, i32, i32, FFIType.ptr, FFIType.ptr], returns: i32 } });
    getsockopt = (fd, level, name, value, len) => libc.symbols.getsockopt(fd, level, name, ptr(value), ptr(len));
  } catch {
    // No glibc: callers that need the answer refuse the peer.
  }
  return getsockopt;
}

/** The peer's credentials (struct ucred), or null when they cannot be read (not Linux, no libc, a closed fd). */
export function peerCred(fd: number): PeerCred | null {
  const get = fd >= 0 ? load() : null;
  if (!get) return null;
  const cred = new Int32Array(3);
  const len = new Uint32Array([12]);
  if (get(fd, SOL_SOCKET, SO_PEERCRED, cred, len) !== 0 || len[0] !== 12) return null;
  return { pid: cred[0]!, uid: cred[1]!, gid: cred[2]! };
}
