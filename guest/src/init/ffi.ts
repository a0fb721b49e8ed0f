// libc through bun:ffi, for what Bun has no API for: mounts, the hostname,
// power-off, reaping orphans, and non-blocking I/O on the virtio-serial port.
// Loaded on first use only (PID 1 or the vport channel).
// String and struct arguments are passed as typed arrays, never as ptr() of a
// temporary: bun:ffi keeps an argument array alive for the call, while a bare
// pointer's buffer may be collected before the call runs.
import { dlopen, FFIType, read } from "bun:ffi";
import { constants } from "node:os";

const { i32, i64, u32, u64, ptr } = FFIType;

function open() {
  return dlopen("libc.so.6", {
    mount: { args: [ptr, ptr, ptr, u64, ptr], returns: i32 },
    umount2: { args: [ptr, i32], returns: i32 },
    sethostname: { args: [ptr, u64], returns: i32 },
    reboot: { args: [i32], returns: i32 },
    sync: { args: [], returns: FFIType.void },
    waitid: { args: [i32, u32, ptr, i32], returns: i32 },
    write: { args: [i32, ptr, u64], returns: i64 },
    poll: { args: [ptr, u64, i32], returns: i32 },
    socket: { args: [i32, i32, i32], returns: i32 },
    ioctl: { args: [i32, u64, ptr], returns: i32 },
    close: { args: [i32], returns: i32 },
    prctl: { args: [i32, u64, u64, u64, u64], returns: i32 },
    fcntl: { args: [i32, i32, i32], returns: i32 },
    clock_settime: { args: [i32, ptr], returns: i32 },
    __errno_location: { args: [], returns: ptr },
  }).symbols;
}

let lib: ReturnType<typeof open> | undefined;
function libc(): ReturnType<typeof open> {
  lib ??= open();
  return lib;
}

export class SysError extends Error {
  constructor(
    readonly call: string,
    readonly errno: number,
  ) {
    super(`${call}: ${errnoName(errno)}`);
  }
}

const ERRNO_NAMES = new Map(Object.entries(constants.errno).map(([k, v]) => [v, k]));
export function errnoName(errno: number): string {
  return ERRNO_NAMES.get(errno) ?? `errno ${errno}`;
}

export const EAGAIN = constants.errno.EAGAIN;
export const ECHILD = constants.errno.ECHILD;
export const EINTR = constants.errno.EINTR;
export const EBUSY = constants.errno.EBUSY;

// Read right after the failing call, before anything else can run on this thread.
function errno(): number {
  const p = libc().__errno_location();
  return p === null ? 0 : read.i32(p, 0);
}

function cstr(s: string): Buffer {
  return Buffer.from(`${s}\0`, "utf8");
}

function check(ret: number, call: string): void {
  if (ret < 0) throw new SysError(call, errno());
}

export const MS_RDONLY = 1;
export const MS_NOSUID = 2;
export const MS_NODEV = 4;
export const MS_NOEXEC = 8;
export const MS_REMOUNT = 32;
export const MNT_DETACH = 2;

export function mount(source: string, target: string, fstype: string, flags: number, data: string): void {
  check(libc().mount(cstr(source), cstr(target), cstr(fstype), flags, cstr(data)), `mount ${target}`);
}

/** Remounts read-only (source, type and data are ignored by MS_REMOUNT). */
export function remountReadOnly(target: string): void {
  check(libc().mount(cstr("none"), cstr(target), cstr("none"), MS_REMOUNT | MS_RDONLY, null), `remount ${target} read-only`);
}

export function umount(target: string, flags = 0): void {
  check(libc().umount2(cstr(target), flags), `umount ${target}`);
}

export function sethostname(name: string): void {
  const b = Buffer.from(name, "utf8");
  check(libc().sethostname(b, b.length), "sethostname");
}

const CLOCK_REALTIME = 0;

/** Sets the wall clock (root only): a VM restored from sleep wakes with the time it went to sleep. */
export function setClock(ms: number): void {
  const ts = new BigInt64Array([BigInt(Math.floor(ms / 1000)), BigInt(Math.floor(ms % 1000) * 1_000_000)]);
  check(libc().clock_settime(CLOCK_REALTIME, ts), "clock_settime");
}

export function sync(): void {
  libc().sync();
}

const PR_SET_DUMPABLE = 4;

/**
 * Makes this process non-dumpable: processes of the same uid can no longer
 * ptrace it or open its /proc entries (its fds among them, such as the
 * console log on fd 1 and 2). The guest runs as the box's user in process
 * boxes, beside everything the box runs.
 */
export function setNonDumpable(): void {
  check(libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)");
}

const F_GETFD = 1;
const F_SETFD = 2;
const FD_CLOEXEC = 1;

/** Marks fd close-on-exec (if it is open): no process the guest starts inherits it. */
export function setCloseOnExec(fd: number): void {
  const flags = libc().fcntl(fd, F_GETFD, 0);
  if (flags >= 0) libc().fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

const RB_POWER_OFF = 0x4321fedc;
const RB_DISABLE_CAD = 0;

/** Powers the machine off; returns only if the kernel refused (not PID 1 / no CAP_SYS_BOOT). */
export function powerOffNow(): SysError {
  libc().reboot(RB_POWER_OFF);
  return new SysError("reboot", errno());
}

/** Ctrl-Alt-Del then sends SIGINT to PID 1 instead of rebooting at once. */
export function disableCtrlAltDel(): void {
  check(libc().reboot(RB_DISABLE_CAD), "reboot(RB_DISABLE_CAD)");
}

const P_ALL = 0;
const P_PID = 1;
const WNOHANG = 1;
const WEXITED = 4;
const WNOWAIT = 0x01000000;
/** si_pid's offset in siginfo_t on Linux (x86_64 and arm64). */
const SI_PID_OFFSET = 16;

const siginfo = new Uint8Array(128);
const siginfoView = new DataView(siginfo.buffer);

/**
 * Peeks at one exited child without reaping it: its pid, 0 if children exist
 * but none has exited, null if there are no children at all (ECHILD).
 */
export function peekExited(): number | null {
  siginfo.fill(0);
  const r = libc().waitid(P_ALL, 0, siginfo, WEXITED | WNOHANG | WNOWAIT);
  if (r < 0) {
    const e = errno();
    if (e === ECHILD) return null;
    throw new SysError("waitid", e);
  }
  return siginfoView.getInt32(SI_PID_OFFSET, true);
}

/** Reaps pid if it has exited; false if it is still running or not our child. */
export function reapPid(pid: number): boolean {
  siginfo.fill(0);
  const r = libc().waitid(P_PID, pid, siginfo, WEXITED | WNOHANG);
  return r === 0 && siginfoView.getInt32(SI_PID_OFFSET, true) === pid;
}

/** write(2): bytes written, or -errno. */
export function writeFd(fd: number, bytes: Uint8Array): number {
  const n = Number(libc().write(fd, bytes, bytes.length));
  return n < 0 ? -errno() : n;
}

export const POLLIN = 0x1;
export const POLLHUP = 0x10;

const pollfd = new Uint8Array(8);
const pollView = new DataView(pollfd.buffer);

/** poll(2) on one fd without waiting: the revents. */
export function pollNow(fd: number, events: number): number {
  pollView.setInt32(0, fd, true);
  pollView.setInt16(4, events, true);
  pollView.setInt16(6, 0, true);
  const r = libc().poll(pollfd, 1, 0);
  if (r < 0) throw new SysError("poll", errno());
  return pollView.getInt16(6, true);
}

const AF_INET = 2;
const SOCK_DGRAM = 2;
const SOCK_CLOEXEC = 0o2000000;
const SIOCGIFFLAGS = 0x8913;
const SIOCSIFFLAGS = 0x8914;
const IFF_UP = 0x1;

/** Sets IFF_UP on an interface (lo): what `ip link set <name> up` does, without a child process. */
export function interfaceUp(name: string): void {
  const c = libc();
  const fd = c.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  check(fd, "socket");
  try {
    // struct ifreq: char ifr_name[16], then a union whose short ifr_flags is at 16.
    const ifreq = new Uint8Array(40);
    ifreq.set(Buffer.from(name, "utf8").subarray(0, 15));
    check(c.ioctl(fd, SIOCGIFFLAGS, ifreq), `SIOCGIFFLAGS ${name}`);
    const view = new DataView(ifreq.buffer);
    view.setInt16(16, view.getInt16(16, true) | IFF_UP, true);
    check(c.ioctl(fd, SIOCSIFFLAGS, ifreq), `SIOCSIFFLAGS ${name}`);
  } finally {
    c.close(fd);
  }
}
