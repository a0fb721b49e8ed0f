// The filesystems PID 1 mounts on top of what /init left (/proc, /sys, /dev,
// the root and /.hutch), and the mount table they are checked against.
import { MS_NODEV, MS_NOEXEC, MS_NOSUID } from "./ffi.ts";

export interface MountSpec {
  source: string;
  target: string;
  fstype: string;
  flags: number;
  data: string;
}

export const BOX_MOUNTS: readonly MountSpec[] = [
  { source: "devpts", target: "/dev/pts", fstype: "devpts", flags: MS_NOSUID | MS_NOEXEC, data: "mode=620,ptmxmode=666" },
  { source: "shm", target: "/dev/shm", fstype: "tmpfs", flags: MS_NOSUID | MS_NODEV, data: "mode=1777" },
  { source: "tmpfs", target: "/run", fstype: "tmpfs", flags: MS_NOSUID | MS_NODEV, data: "mode=755" },
  { source: "tmpfs", target: "/tmp", fstype: "tmpfs", flags: MS_NOSUID | MS_NODEV, data: "mode=1777" },
];

/** Mount points listed in /proc/self/mounts, in mount order (octal escapes such as \040 decoded). */
export function mountPoints(procMounts: string): string[] {
  const out: string[] = [];
  for (const line of procMounts.split("\n")) {
    const target = line.split(" ")[1];
    if (target) out.push(target.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
  }
  return out;
}

/** What to unmount at power-off: everything but / and the kernel's own, deepest (latest) first. */
export function unmountOrder(points: readonly string[]): string[] {
  const keep = new Set(["/", "/proc", "/sys", "/dev"]);
  return [...points].reverse().filter((p) => !keep.has(p));
}
