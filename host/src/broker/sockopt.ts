// A bigger send buffer for the box's side of every gate connection. It is a
// unix socket, where the sender's buffer is the whole queue between the gate
// and its reader: at the default ~208 KiB the two wake each other every few
// hundred KiB, and a bulk download through the gate runs at half speed or
// less (1 GiB through a tunnel: 560–900 MiB/s; with 4 MiB, 1,080–1,170
// against 1,090–1,330 direct). The kernel caps SO_SNDBUF at
// net.core.wmem_max (212,992 on a stock kernel); a daemon with CAP_NET_ADMIN
// (root, as on a server) asks with SO_SNDBUFFORCE, which the cap does not bind.
// Linux only; elsewhere the buffer keeps its size, which only costs speed.
import { dlopen, FFIType } from "bun:ffi";

const SOL_SOCKET = 1;
const SO_SNDBUF = 7;
const SO_SNDBUFFORCE = 32;
export const BOX_SEND_BUFFER = 4 * 1024 * 1024;

type SetSockOpt = (fd: number, level: number, name: number, value: Int32Array, len: number) => number;
let setsockopt: SetSockOpt | null | undefined;

function load(): SetSockOpt | null {
  if (setsockopt !== undefined) return setsockopt;
  setsockopt = null;
  if (process.platform !== "linux") return null;
  try {
    const { i32, u32, ptr } = FFIType;
    const libc = dlopen("libc.so.6", { setsockopt: { args: [i32, i32, i32, ptr, u32], returns: i32 } });
    setsockopt = (fd, level, name, value, len) => libc.symbols.setsockopt(fd, level, name, value, len);
  } catch {
    // No glibc (musl, static): the default buffer stays.
  }
  return setsockopt;
}

/** Best effort: asks for BOX_SEND_BUFFER on fd (a socket the gate accepted). */
export function growSendBuffer(fd: number): void {
  const set = fd >= 0 ? load() : null;
  if (!set) return;
  const size = new Int32Array([BOX_SEND_BUFFER]);
  if (set(fd, SOL_SOCKET, SO_SNDBUFFORCE, size, 4) !== 0) set(fd, SOL_SOCKET, SO_SNDBUF, size, 4);
}
