// The agent CLI cache as boxes see it. Each installed CLI (one directory per
// pinned version, host/src/harness/install.ts) also gets a read-only ext4
// disk of its own, <cache>/<agent>-<version>.img, made once beside it. A root
// daemon shows boxes those disks, not the directories: it mounts a tiny tmpfs
// at /run/hutch/agents/<key of the cache's path>, marks it shared, and
// loop-mounts every disk inside it; a box binds that at /.hutch/agents. (Under
// /run, not in the cache: runtime mounts go when the host reboots, and never
// stand in the way of removing a home or a cache.) So the box reads the CLIs from
// filesystems of their own (its mount table names no host path), and a CLI
// installed while a box runs still appears in it: bwrap makes a box's mounts
// slaves of the host's, so a disk mounted later under the shared tmpfs
// propagates into every running box. Without root the directory itself is
// bound, as before. The same disks are what VMs attach.
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import { makeExt4, MiB, roundUp, treeBytes } from "../image/disk.ts";
import { parseMountinfo } from "./cgroup.ts";
import { log } from "../log.ts";
import { env } from "../env.ts";

const logger = log.create({ service: "agents" });

export const AGENT_DISKS = {
  /** Where the shared tmpfs of each cache is mounted. */
  runDir: "/run/hutch/agents",
  /** v2: a whole number of 2 MiB, which a pmem device needs. */
  image: (dir: string) => `${dir}.v2.img`,
} as const;

/** The shared tmpfs a cache's disks are mounted in: /run/hutch/agents/<16 hex of sha256(the cache's real path)>. */
export function sharedMount(cacheDir: string): string {
  const real = existsSync(cacheDir) ? realpathSync(cacheDir) : cacheDir;
  return join(AGENT_DISKS.runDir, new Bun.CryptoHasher("sha256").update(real).digest("hex").slice(0, 16));
}

/** Installed CLI directories in the cache (the names install.ts gives them). */
function installed(cacheDir: string): string[] {
  if (!existsSync(cacheDir)) return [];
  return readdirSync(cacheDir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && /^[a-z0-9]+-[0-9A-Za-z.+-]+$/.test(e.name))
    .map((e) => e.name);
}

function mountPoints(): Set<string> {
  return new Set(parseMountinfo(readFileSync("/proc/self/mountinfo", "utf8")).map((m) => m.point));
}

async function sh(argv: string[], what: string): Promise<void> {
  const proc = Bun.spawn(argv, {
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
    env: { PATH: `${env.path() ?? ""}:/usr/sbin:/sbin` },
  });
  const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0)
    throw new HutchError("failed", `${what}: ${argv.join(" ")} exited ${code}: ${err.trim()}`, "check the host: hutch doctor");
}

/** Makes <cache>/<name>.img from <cache>/<name> unless it exists (temp file, then rename). */
export async function buildAgentDisk(cacheDir: string, name: string): Promise<string> {
  const image = join(cacheDir, AGENT_DISKS.image(name));
  if (existsSync(image)) return image;
  const dir = join(cacheDir, name);
  const files = readdirSync(dir, { recursive: true }).length;
  const tmp = `${image}.tmp-${process.pid}`;
  logger.info("making the read-only disk of an agent CLI (once per version)", { agent: name });
  try {
    // du's allocated size plus room for ext4's own metadata; an inode per file with headroom.
    // 4 KiB blocks and a whole number of 2 MiB: what a DAX mount of a pmem device needs (image/BOOT.md).
    await makeExt4(dir, tmp, {
      label: name.slice(0, 16),
      bytes: roundUp(Math.ceil((await treeBytes(dir)) * 1.1) + 32 * MiB, 2 * MiB),
      journal: false,
      blockSize: 4096,
      inodes: Math.ceil(files * 1.2) + 256,
    });
    renameSync(tmp, image);
    // A disk of an earlier layout is not used any more.
    rmSync(join(cacheDir, `${name}.img`), { force: true });
  } finally {
    rmSync(tmp, { force: true });
  }
  return image;
}

/** Every installed CLI's disk (made where missing), for a VM to attach: name, path, size. */
export async function agentDisks(cacheDir: string): Promise<{ name: string; path: string; bytes: number }[]> {
  const out: { name: string; path: string; bytes: number }[] = [];
  for (const name of installed(cacheDir)) {
    const path = await buildAgentDisk(cacheDir, name);
    out.push({ name, path, bytes: statSync(path).size });
  }
  return out;
}

/** Drops an agent's disk (before its directory is replaced): unmounted lazily, so a box reading it keeps its view. */
export async function dropAgentDisk(cacheDir: string, name: string): Promise<void> {
  const point = join(sharedMount(cacheDir), name);
  if (mountPoints().has(point)) await sh(["umount", "-l", point], "unmounting an agent CLI's disk");
  rmSync(join(cacheDir, AGENT_DISKS.image(name)), { force: true });
  rmSync(join(cacheDir, `${name}.img`), { force: true });
}

/** Are boxes already reading the shared directory (a root daemon set it up)? */
export function agentsShared(cacheDir: string): boolean {
  return mountPoints().has(sharedMount(cacheDir));
}

/** Takes `lock` (a file holding this pid) if nobody holds it. */
function takeLock(lock: string): boolean {
  try {
    const fd = openSync(lock, "wx", 0o600);
    writeSync(fd, String(process.pid));
    closeSync(fd);
    return true;
  } catch {
    return false;
  }
}

/** One daemon at a time sets the shared mounts up (several homes may share a cache). */
async function withLock<T>(shared: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${shared}.lock`;
  mkdirSync(AGENT_DISKS.runDir, { recursive: true, mode: 0o755 });
  for (let i = 0; !takeLock(lock); i++) {
    // A holder that died leaves its lock: older than a minute is stale.
    if (existsSync(lock) && Date.now() - statSync(lock).mtimeMs > 60_000) rmSync(lock, { force: true });
    if (i > 600)
      throw new HutchError("failed", `${lock} is held by another hutch`, `if no hutch is setting agents up, remove it: rm ${lock}`);
    await Bun.sleep(100);
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

/**
 * Unmounts the shared directories of caches that are gone (a home removed
 * while its daemon's mounts stayed: a SIGKILLed daemon, a deleted test home),
 * with the disks mounted in them, so their loop devices let go of the
 * deleted images' space. A directory's cache is named in `<dir>.path` beside
 * it (mounts made before that file existed are left alone); one whose lock
 * another daemon holds is left for the next sweep. Best effort: a failure is
 * logged. Run when a cache's directory is first mounted.
 */
async function sweepStale(points: Set<string>): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(AGENT_DISKS.runDir).filter((n) => n.endsWith(".path"));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(AGENT_DISKS.runDir, name.slice(0, -".path".length));
    const lock = `${dir}.lock`;
    try {
      if (existsSync(readFileSync(`${dir}.path`, "utf8")) || !takeLock(lock)) continue;
    } catch {
      continue;
    }
    try {
      // Read again under the lock: a daemon that makes the cache again makes its directory first.
      if (existsSync(readFileSync(`${dir}.path`, "utf8"))) continue;
      if (points.has(dir)) await sh(["umount", "-R", "-l", dir], "unmounting a removed agent cache's directory");
      // Empty once unmounted; never removed recursively, in case something is still mounted on it.
      if (existsSync(dir)) rmdirSync(dir);
      rmSync(`${dir}.path`, { force: true });
      logger.info("unmounted the agents' directory of a cache that is gone", { dir });
    } catch (err) {
      logger.warn("could not unmount the agents' directory of a cache that is gone", { dir, err: String(err) });
    } finally {
      rmSync(lock, { force: true });
    }
  }
}

/**
 * Root daemons: the directory to bind at /.hutch/agents, with every installed
 * CLI's disk made and mounted in it. Idempotent; cheap when all is in place.
 */
export async function agentsForBoxes(cacheDir: string): Promise<string> {
  mkdirSync(cacheDir, { recursive: true });
  const shared = sharedMount(cacheDir);
  const names = installed(cacheDir);
  const points = mountPoints();
  if (points.has(shared) && names.every((n) => points.has(join(shared, n)))) return shared;
  return withLock(shared, async () => {
    let now = mountPoints();
    if (!now.has(shared)) {
      await sweepStale(now);
      mkdirSync(shared, { recursive: true, mode: 0o755 });
      await sh(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m,nosuid,nodev", "hutch-agents", shared], "mounting the agents' directory");
      await sh(["mount", "--make-shared", shared], "sharing the agents' directory with boxes");
      // Beside the mount, not in it (boxes see the mount, and it names no host path): whose it is.
      writeFileSync(`${shared}.path`, realpathSync(cacheDir), { mode: 0o644 });
    }
    now = mountPoints();
    for (const name of names) {
      const point = join(shared, name);
      if (now.has(point)) continue;
      const image = await buildAgentDisk(cacheDir, name);
      mkdirSync(point, { recursive: true });
      await sh(["mount", "-t", "ext4", "-o", "loop,ro,nosuid,nodev,noatime", image, point], `mounting ${name}'s disk`);
    }
    return shared;
  });
}
