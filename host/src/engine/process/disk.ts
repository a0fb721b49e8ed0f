// A process box's writable roots (/workspace, the home, and run/, where the
// guest binds its channel socket through a descriptor: run/ is not mounted in
// the box) on a filesystem of their own when the daemon runs as root: a
// sparse ext4 image per box, loop-mounted nosuid and nodev. That gives three
// things at once: a disk quota (writing past it is ENOSPC in the box, and the
// host's free space is untouched beyond it), files owned by the box's own
// host uid, and mounts whose source is the box's own filesystem, so
// /proc/self/mountinfo in the box names no host path. Without root (no loop
// devices) the roots are plain directories, as before: no quota, reported by
// doctor. Boxes made before quotas keep their plain directories.
import {
  chownSync,
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { parseMountinfo } from "../cgroup.ts";
import { env } from "../../env.ts";
import { log } from "../../log.ts";

const logger = log.create({ service: "engine.process" });

export const DISK_FILES = {
  image: "disk.img",
  mount: "disk",
} as const;

export interface BoxRoots {
  workspace: string;
  home: string;
  run: string;
  /** True when the roots are on the box's own disk image. */
  quota: boolean;
}

/** Where a box's roots are on the host: on its disk image when it has one, else the old plain directories. */
export function boxRoots(boxDir: string): BoxRoots {
  if (existsSync(join(boxDir, DISK_FILES.image))) {
    const m = join(boxDir, DISK_FILES.mount);
    return { workspace: join(m, "workspace"), home: join(m, "home"), run: join(m, "run"), quota: true };
  }
  return { workspace: join(boxDir, "workspace"), home: join(boxDir, "home"), run: join(boxDir, "run"), quota: false };
}

async function sh(argv: string[], what: string): Promise<string> {
  let proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  try {
    proc = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { PATH: `${env.path() ?? ""}:/usr/sbin:/sbin` } });
  } catch {
    throw new HutchError("unavailable", `${what}: ${argv[0]} is not installed`, "install it: apt-get install -y e2fsprogs mount");
  }
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0)
    throw new HutchError(
      "failed",
      `${what}: ${argv.join(" ")} exited ${code}: ${err.trim().split("\n").slice(-3).join("; ")}`,
      "check the host: hutch doctor",
    );
  return out;
}

/** Is something mounted exactly at dir (in the daemon's mount namespace)? */
export function isMountPoint(dir: string): boolean {
  return mountAt(dir) !== undefined;
}

/** Mounted at dir and writable: neither the mount nor its filesystem (ext4 turns read-only on an error) is "ro". */
function writable(dir: string): boolean {
  const m = mountAt(dir);
  return m !== undefined && !m.mountOptions.includes("ro") && !m.options.includes("ro");
}

function mountAt(dir: string): ReturnType<typeof parseMountinfo>[number] | undefined {
  try {
    return parseMountinfo(readFileSync("/proc/self/mountinfo", "utf8")).findLast((m) => m.point === dir);
  } catch {
    return undefined;
  }
}

/**
 * Creates the box's disk image (sparse, `bytes` big) unless it exists, and
 * mounts it unless it is mounted; the roots are owned by `owner`. Idempotent,
 * and safe to repeat after a crash at any step: the image is formatted under
 * a temporary name and renamed only once complete.
 */
export async function ensureDisk(boxDir: string, bytes: number, owner: { uid: number; gid: number }): Promise<BoxRoots> {
  const image = join(boxDir, DISK_FILES.image);
  const mount = join(boxDir, DISK_FILES.mount);
  if (!existsSync(image)) {
    const tmp = `${image}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      ftruncateSync(fd, bytes);
    } finally {
      closeSync(fd);
    }
    // Inode tables and the journal are left lazy: the file is sparse, so the
    // unwritten blocks already read as zeros (and noinit_itable below keeps the
    // kernel from zeroing them in the background, which would allocate them).
    await sh(
      [
        "mke2fs",
        "-q",
        "-F",
        "-t",
        "ext4",
        "-m",
        "0",
        "-L",
        "hutch-box",
        "-E",
        `lazy_itable_init=1,lazy_journal_init=1,root_owner=${owner.uid}:${owner.gid}`,
        tmp,
      ],
      "formatting the box's disk",
    );
    renameSync(tmp, image);
  }
  mkdirSync(mount, { recursive: true, mode: 0o700 });
  // A read-only mount here is a snapshot's read of the stopped disk, left by a daemon that died during it.
  // (mount(8) refuses a second mount of the same file, so there is at most one.)
  if (isMountPoint(mount) && !writable(mount)) await unmountDisk(boxDir);
  if (!isMountPoint(mount)) {
    await loopsGone(image);
    await sh(["mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime,noinit_itable", image, mount], "mounting the box's disk");
  }
  if (!writable(mount)) {
    const m = mountAt(mount);
    throw new HutchError(
      "failed",
      `the box's disk is mounted read-only at ${mount} (mount options ${m?.mountOptions.join(",")}, filesystem ${m?.options.join(",")})`,
      `stop the box, unmount it (umount ${mount}), check it (e2fsck -f ${image}), then start it again`,
    );
  }
  const roots = boxRoots(boxDir);
  for (const [dir, mode] of [
    [roots.workspace, 0o755],
    [roots.home, 0o700],
    [roots.run, 0o700],
  ] as const) {
    if (!existsSync(dir)) mkdirSync(dir, { mode });
    const st = statSync(dir);
    if (st.uid !== owner.uid || st.gid !== owner.gid) chownSync(dir, owner.uid, owner.gid);
  }
  return roots;
}

/**
 * Mounts a stopped box's disk read-only (for a snapshot from the disk);
 * true when this call mounted it, false when it was mounted already.
 */
export async function mountReadOnly(boxDir: string): Promise<boolean> {
  const mount = join(boxDir, DISK_FILES.mount);
  if (isMountPoint(mount)) return false;
  mkdirSync(mount, { recursive: true, mode: 0o700 });
  await sh(
    ["mount", "-t", "ext4", "-o", "loop,ro,nosuid,nodev,noexec,noatime", join(boxDir, DISK_FILES.image), mount],
    "mounting the box's disk to read it",
  );
  return true;
}

/**
 * Unmounts the box's disk if it is mounted, and waits for its loop device to
 * go. The kernel detaches an autoclear loop device after the unmount returns
 * (asynchronously since Linux 5.17), and mount(8) given the same file reuses
 * a device still attached: a read-only one (a snapshot's read) makes the
 * next start's mount read-only too, with only a warning.
 */
export async function unmountDisk(boxDir: string): Promise<void> {
  const mount = join(boxDir, DISK_FILES.mount);
  if (!isMountPoint(mount)) return;
  await sh(["umount", mount], "unmounting the box's disk");
  if (isMountPoint(mount)) return; // another mount was under it: still in use
  await loopsGone(join(boxDir, DISK_FILES.image));
}

/**
 * Waits (5 s at most) for the kernel to detach the loop devices of an
 * unmounted image that a mount set to go on their last close, then detaches
 * what is left (a device attached by hand, or one the kernel is slow with).
 */
async function loopsGone(image: string): Promise<void> {
  let path: string;
  try {
    path = realpathSync(image);
  } catch {
    return; // no image: no device
  }
  const pending = () => loopsOf(path).some((n) => readSys(n, "autoclear") === "1");
  const deadline = Date.now() + 5000;
  while (pending() && Date.now() < deadline) await Bun.sleep(20);
  // Best effort: a device still held (the kernel detaching it meanwhile, or a mount of it elsewhere) is left, and a
  // start that then gets a read-only mount says so (ensureDisk).
  for (const dev of loopsOf(path)) {
    await sh(["losetup", "-d", `/dev/${dev}`], "detaching the box's disk's loop device").catch((err: unknown) =>
      logger.warn("a loop device of a box's disk stays attached", { device: dev, err: String(err) }),
    );
  }
}

function readSys(loop: string, file: string): string | null {
  try {
    return readFileSync(`/sys/block/${loop}/loop/${file}`, "utf8").trim();
  } catch {
    return null; // not attached (any more)
  }
}

/** The loop devices attached to the image at real path `path`, by name ("loop7"), from /sys/block. */
function loopsOf(path: string): string[] {
  let names: string[];
  try {
    names = readdirSync("/sys/block").filter((n) => n.startsWith("loop"));
  } catch {
    return [];
  }
  return names.filter((n) => readSys(n, "backing_file") === path);
}

/** The image's size in bytes, or null without one. */
export function diskBytes(boxDir: string): number | null {
  try {
    return statSync(join(boxDir, DISK_FILES.image)).size;
  } catch {
    return null;
  }
}

/**
 * Grows or shrinks a stopped box's disk to `bytes` (resize2fs, offline). A
 * shrink below what the files need is refused by resize2fs and leaves the
 * disk as it was.
 */
export async function resizeDisk(boxDir: string, bytes: number): Promise<void> {
  const image = join(boxDir, DISK_FILES.image);
  const now = diskBytes(boxDir);
  if (now === null || now === bytes) return;
  await unmountDisk(boxDir);
  await sh(["e2fsck", "-f", "-p", image], "checking the box's disk before resizing");
  if (bytes > now) {
    const fd = openSync(image, "r+");
    try {
      ftruncateSync(fd, bytes);
    } finally {
      closeSync(fd);
    }
    await sh(["resize2fs", image], "growing the box's disk");
    return;
  }
  await sh(["resize2fs", image, `${Math.floor(bytes / 1024)}K`], "shrinking the box's disk (it must still hold the files)");
  const fd = openSync(image, "r+");
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}
