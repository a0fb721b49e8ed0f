// The process engine: hutch-guest on the host inside a bubblewrap sandbox
// (own user, pid, mount, net, ipc and uts namespaces; no network). For hosts
// without virtualization and for fast tests. Reports isolation: namespace.
// When the daemon is root, each box also gets its own unprivileged host uid,
// its own disk (a quota), cgroup limits and a seccomp filter; see README.md
// beside this file for how they fit together.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { totalmem } from "node:os";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import type { BoxHandle, ChannelEndpoint, Engine, EngineCapabilities, LimitReport, Observed, ProbeResult, SleepState } from "../types.ts";
import { bwrapArgs, groupFile, hostsFile, passwdFile, SHARED_ETC, type BwrapFds } from "./bwrap-args.ts";
import { extraHostDirs, hostLayout, SYSTEM_DIRS } from "./host-dirs.ts";
import { boxLeftovers, childrenOf, isAlive, killBox, procStartTime, readIdentity, waitGone } from "../pidfile.ts";
import { guestBinaryPath } from "../guest-binary.ts";
import { BoxCgroup, describePlan, hostCgroups, type CgroupPlan } from "../cgroup.ts";
import { boxIdentity, hostRanges, readIdentityFile, type BoxIdentity } from "../idmap.ts";
import {
  boxRoots,
  diskBytes,
  ensureDisk,
  isMountPoint,
  mountReadOnly,
  resizeDisk,
  unmountDisk,
  DISK_FILES,
  type BoxRoots,
} from "./disk.ts";
import { hostSeccompArch, seccompBytes } from "./seccomp.ts";
import { parseSize, formatSize } from "../limits.ts";
import { consoleTailOf } from "../console.ts";
import { agentsForBoxes } from "../agent-disks.ts";
import { ENGINE_FILES } from "../box-files.ts";
import { env } from "../../env.ts";
import { log } from "../../log.ts";

const logger = log.create({ service: "engine.process" });

/** File names inside $HUTCH_HOME/boxes/<id>/ (listed in host/README.md); the socket's is relative to the run root (./disk.ts). */
export const BOX_FILES = {
  ...ENGINE_FILES,
  seccomp: "seccomp.bpf",
  /** Present while the box is asleep: its programs were stopped, its disk kept. */
  asleep: "asleep.json",
} as const;

/** Defaults where `box create` names no limit (README.md beside this file says why these). */
export const PROCESS_DEFAULTS = {
  memoryMiB: Math.min(4096, Math.floor(totalmem() / 1024 / 1024 / 2)),
  pids: 4096,
  disk: "16G",
} as const;

/** /run in the box holds only what programs put there (the guest's socket is not in the box's view). */
const RUN_BYTES = 16 * 1024 * 1024;

export interface ProcessLimits {
  cpus?: number;
  memoryMiB: number;
  pids: number;
  /** Bytes of the box's disk (mapped mode only). */
  diskBytes: number;
  /** /tmp's size: half the memory limit, since a tmpfs is memory the box's limit is charged for. */
  tmpBytes: number;
}

const readPid = (box: BoxHandle) => readIdentity(join(box.dir, BOX_FILES.pid));

/**
 * The host pid of the box's guest (its PID 1), or null when the box is not
 * running. A box started before the pidfile named it has it as bwrap's only
 * child: every other box process descends from the guest.
 */
export function guestPid(box: BoxHandle): number | null {
  const id = readPid(box);
  if (!id || !isAlive(id)) return null;
  try {
    const { guest } = JSON.parse(readFileSync(join(box.dir, BOX_FILES.pid), "utf8")) as { guest?: unknown };
    if (typeof guest === "number" && Number.isInteger(guest) && guest > 0) return guest;
  } catch {
    // read by readPid a moment ago; gone now means stopped
  }
  const children = childrenOf(id.pid);
  return children.length === 1 ? children[0]! : null;
}

/** Root daemons map each box onto its own host uid (./bwrap-args.ts); others run boxes as themselves. */
export const mappedMode = (): boolean => process.getuid?.() === 0;

/** Reads bwrap's --info-fd JSON ({"child-pid": N}); null if bwrap exited first. */
async function readChildPid(fd: number, timeoutMs: number): Promise<number | null> {
  const reader = Bun.file(fd).stream().getReader();
  let text = "";
  const timer = setTimeout(() => void reader.cancel(), timeoutMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
      const m = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (m) return Number(m[1]);
    }
  } catch {
    // cancelled by the timeout
  } finally {
    clearTimeout(timer);
  }
  return null;
}

export const PROCESS_CAPABILITIES: EngineCapabilities = {
  isolation: "namespace",
  pause: false,
  memorySnapshot: false,
  screenshot: false,
  agentsAtBoot: false,
  // CRIU cannot checkpoint here (see ./README.md, sleep): a sleep stops the programs and keeps the disk.
  sleep: "disk",
};

export class ProcessEngine implements Engine {
  readonly name = "process" as const;
  readonly capabilities = PROCESS_CAPABILITIES;

  constructor(
    private readonly home: string,
    private readonly cgroups: () => CgroupPlan = hostCgroups,
  ) {}

  async probe(): Promise<ProbeResult> {
    let proc: { exitCode: number | null; stderr?: Buffer };
    try {
      proc = Bun.spawnSync([env.bwrap(), "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"], {
        stderr: "pipe",
      });
    } catch (err) {
      proc = { exitCode: null, stderr: Buffer.from((err as Error).message) };
    }
    if (proc.exitCode !== 0) {
      const err = proc.stderr?.toString().trim() || `exit ${proc.exitCode}`;
      const missing = proc.exitCode === null || /ENOENT|not found|No such file/i.test(err);
      return {
        ok: false,
        engine: "process",
        detail: missing ? "bubblewrap (bwrap) is not installed" : `bubblewrap cannot create namespaces: ${err}`,
        fix: missing
          ? "apt-get install -y bubblewrap"
          : "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1",
      };
    }
    if (mappedMode() && !existsSync("/usr/bin/setpriv")) {
      return {
        ok: false,
        engine: "process",
        detail: "setpriv (util-linux) is missing: a root daemon needs it to drop box processes to their own uid",
        fix: "apt-get install -y util-linux",
      };
    }
    return { ok: true, engine: "process", detail: "bubblewrap can create user, pid and network namespaces" };
  }

  /** The box's effective limits: its own settings over the defaults. */
  boxLimits(box: BoxHandle): ProcessLimits {
    const c = box.config as { cpus?: number; memoryMiB?: number; pids?: number; disk?: string };
    const memoryMiB = c.memoryMiB ?? PROCESS_DEFAULTS.memoryMiB;
    return {
      ...(c.cpus ? { cpus: c.cpus } : {}),
      memoryMiB,
      pids: c.pids ?? PROCESS_DEFAULTS.pids,
      diskBytes: parseSize(c.disk ?? PROCESS_DEFAULTS.disk),
      tmpBytes: Math.floor((memoryMiB * 1024 * 1024) / 2),
    };
  }

  private cgroup(box: BoxHandle): BoxCgroup | null {
    const plan = this.cgroups();
    return Object.values(plan).some((p) => p.ok) ? new BoxCgroup(plan, box.id) : null;
  }

  private identity(box: BoxHandle): BoxIdentity | null {
    return mappedMode() ? boxIdentity(join(this.home, "boxes"), box.id) : null;
  }

  describe(box: BoxHandle): Record<string, string> {
    const l = this.boxLimits(box);
    const plan = this.cgroups();
    const enforced = (ok: boolean, value: string) => (ok ? value : `${value} (not enforced on this host: hutch doctor)`);
    const out: Record<string, string> = {
      cpus: enforced(plan.cpu.ok, l.cpus ? String(l.cpus) : "all"),
      memory: enforced(plan.memory.ok, formatSize(l.memoryMiB * 1024 * 1024)),
      pids: enforced(plan.pids.ok, String(l.pids)),
      tmp: formatSize(l.tmpBytes),
    };
    const disk = diskBytes(box.dir);
    out.disk =
      disk !== null
        ? formatSize(disk)
        : mappedMode()
          ? formatSize(l.diskBytes)
          : `${formatSize(l.diskBytes)} (not enforced: the daemon is not root)`;
    const id = mappedMode() ? readIdentityFile(box.dir) : null;
    if (id) out["host uid"] = String(id.uid);
    const use = this.cgroup(box)?.usage();
    if (use?.memoryBytes !== undefined) out["memory used"] = formatSize(use.memoryBytes);
    if (use?.pids !== undefined) out.processes = String(use.pids);
    return out;
  }

  limits(): LimitReport[] {
    const plan = describePlan(this.cgroups());
    const fixCg = "run the daemon as root, or as a systemd service with Delegate=yes (cgroup v2)";
    const root = mappedMode();
    const cg = (name: string, c: keyof typeof plan) => ({
      name,
      enforced: plan[c].enforced,
      detail: plan[c].detail,
      ...(plan[c].enforced ? {} : { fix: fixCg }),
    });
    const arch = hostSeccompArch();
    return [
      root
        ? { name: "host identity", enforced: true, detail: `each box runs as its own unprivileged host uid (${hostRanges().uid.source})` }
        : {
            name: "host identity",
            enforced: true,
            detail: "boxes run as the daemon's own user (it is not root), like any rootless sandbox",
          },
      cg("processes", "pids"),
      cg("memory", "memory"),
      cg("cpu", "cpu"),
      root
        ? { name: "disk", enforced: true, detail: "each box's /workspace and home are on a disk image of their own (loop-mounted ext4)" }
        : {
            name: "disk",
            enforced: false,
            detail: "the daemon is not root, so it cannot mount a disk image per box; boxes write to plain directories",
            fix: "run the daemon as root for per-box disk quotas",
          },
      { name: "/tmp size", enforced: true, detail: "/tmp and /dev/shm are tmpfs mounts capped at half the box's memory" },
      arch
        ? {
            name: "seccomp filter",
            enforced: true,
            detail: `${arch}: nested namespaces, keyrings, bpf, perf, modules, mounts and clock changes are refused (EPERM)`,
          }
        : { name: "seccomp filter", enforced: false, detail: `no filter for ${process.arch}`, fix: "run hutch on x86_64 or arm64 Linux" },
    ];
  }

  async create(box: BoxHandle): Promise<void> {
    mkdirSync(join(box.dir, "etc"), { recursive: true });
    writeFileSync(join(box.dir, "etc/passwd"), passwdFile());
    writeFileSync(join(box.dir, "etc/group"), groupFile());
    writeFileSync(join(box.dir, "etc/hosts"), hostsFile(box.name));
    this.identity(box);
  }

  /** The box's writable roots, ready: its own disk (mapped mode), else plain directories. */
  private async roots(box: BoxHandle, limits: ProcessLimits, id: BoxIdentity | null): Promise<BoxRoots> {
    const legacy = boxRoots(box.dir);
    if (!id || (!legacy.quota && existsSync(legacy.workspace))) {
      // Not root, or a box made before quotas: plain directories as before.
      for (const d of [legacy.workspace, legacy.home, legacy.run]) mkdirSync(d, { recursive: true });
      return legacy;
    }
    const now = diskBytes(box.dir);
    if (now !== null && now !== limits.diskBytes) await resizeDisk(box.dir, limits.diskBytes);
    return ensureDisk(box.dir, limits.diskBytes, id);
  }

  async start(box: BoxHandle): Promise<undefined> {
    await this.create(box);
    const system = hostLayout([...SYSTEM_DIRS, ...extraHostDirs(env.boxHostDirs(), this.home)]);
    const limits = this.boxLimits(box);
    const id = this.identity(box);
    const roots = await this.roots(box, limits, id);
    rmSync(join(roots.run, BOX_FILES.socket), { force: true });
    const cg = this.cgroup(box);
    cg?.create({ ...(limits.cpus ? { cpus: limits.cpus } : {}), memoryBytes: limits.memoryMiB * 1024 * 1024, pids: limits.pids });
    const guest = await guestBinaryPath(this.home);
    const cache = env.agentsDir(this.home);
    mkdirSync(cache, { recursive: true });
    const agents = id ? await agentsForBoxes(cache) : cache;
    const arch = hostSeccompArch();
    if (arch) writeFileSync(join(box.dir, BOX_FILES.seccomp), seccompBytes(arch));
    else if (id)
      throw new HutchError(
        "unavailable",
        `no seccomp filter for ${process.arch}, which a root daemon's boxes need (nested user namespaces are refused by it)`,
        "run hutch as a non-root user on this machine",
      );

    // The child's fds, by position in stdio: 3 and 4 are pipes; the rest are files opened here.
    const opened: number[] = [];
    const open = (path: string) => {
      const fd = openSync(path, "r");
      opened.push(fd);
      return fd;
    };
    const consoleFd = openSync(join(box.dir, BOX_FILES.console), "a");
    opened.push(consoleFd);
    const fds: BwrapFds = { block: 3, info: 4, guest: 5, passwd: 6, group: 7, hosts: 8, channel: 9, ...(arch ? { seccomp: 10 } : {}) };
    let proc: ReturnType<typeof Bun.spawn>;
    try {
      const stdio = [
        "ignore",
        consoleFd,
        consoleFd,
        "pipe",
        "pipe",
        open(guest),
        open(join(box.dir, "etc/passwd")),
        open(join(box.dir, "etc/group")),
        open(join(box.dir, "etc/hosts")),
        // The channel's directory, never mounted in the box: only the guest reaches it, through this descriptor.
        open(roots.run),
        ...(arch ? [open(join(box.dir, BOX_FILES.seccomp))] : []),
      ];
      const argv = bwrapArgs({
        bwrap: env.bwrap(),
        boxId: box.id,
        hostname: box.name,
        roots,
        system,
        etc: SHARED_ETC.filter((e) => existsSync(`/etc/${e}`)),
        agents,
        fds,
        mapped: id !== null,
        tmpBytes: limits.tmpBytes,
        runBytes: RUN_BYTES,
      });
      // Detached: the box outlives the daemon; a restarted daemon finds it by its pidfile.
      proc = Bun.spawn(argv, {
        stdio: stdio as never,
        detached: true,
        env: { PATH: env.path() ?? "/usr/bin:/bin", HUTCH_BOX_ID: box.id },
      });
    } catch (err) {
      throw new HutchError("failed", `could not run bubblewrap: ${(err as Error).message}`, "check the host: hutch doctor");
    } finally {
      for (const fd of opened) closeSync(fd);
    }
    proc.unref();
    const [blockFd, infoFd] = [proc.stdio[3] as unknown as number, proc.stdio[4] as unknown as number];
    let child: number | null = null;
    try {
      child = await readChildPid(infoFd, 10_000);
      if (!child)
        throw new HutchError("failed", `the sandbox did not start: ${await this.consoleTail(box)}`, "check the host: hutch doctor");
      if (id) {
        // Namespace root stays host root only for bwrap's own setup (it must read what it binds); setpriv leaves it before the guest runs.
        writeFileSync(`/proc/${child}/uid_map`, `0 0 1\n1000 ${id.uid} 1\n`);
        writeFileSync(`/proc/${child}/gid_map`, `0 0 1\n1000 ${id.gid} 1\n`);
      }
      cg?.attach(child);
      writeSync(blockFd, "1");
    } catch (err) {
      proc.kill("SIGKILL");
      throw err instanceof HutchError
        ? err
        : new HutchError("failed", `could not set the box up: ${(err as Error).message}`, "check the host: hutch doctor");
    } finally {
      for (const fd of [blockFd, infoFd]) {
        try {
          closeSync(fd);
        } catch {
          // closed already
        }
      }
    }
    const startTime = procStartTime(proc.pid);
    if (!startTime) {
      throw new HutchError("failed", `box process exited at once: ${await this.consoleTail(box)}`, "check the host: hutch doctor");
    }
    // The guest's own host pid (the sandbox's PID 1) is what a restarted daemon checks its channel's peer against.
    writeFileSync(join(box.dir, BOX_FILES.pid), JSON.stringify({ pid: proc.pid, startTime, guest: child }));
    logger.info("box process started", { box: box.name, pid: proc.pid, ...(id ? { uid: id.uid } : {}) });
  }

  async stop(box: BoxHandle, timeoutMs: number, requestShutdown: () => void): Promise<{ forced: boolean }> {
    const id = readPid(box);
    if (!id || !isAlive(id)) {
      await this.release(box);
      return { forced: false };
    }
    requestShutdown();
    if (await waitGone(id, timeoutMs)) {
      // Its init gone, the box's other processes are being killed by the kernel, not yet gone on a busy
      // host (a fork bomb's children): wait for them as a kill does, so a stopped box has none left.
      await killBox(box.id, null, join(box.dir, BOX_FILES.pid));
      await this.release(box);
      return { forced: false };
    }
    logger.warn("graceful stop timed out; killing", { box: box.name, timeoutMs });
    await this.kill(box);
    return { forced: true };
  }

  /**
   * Sleep without CRIU: the box's processes end (as a kill: a sleep is not a
   * shutdown the programs could delay), its disk stays, and a marker says it
   * sleeps, written atomically after the processes are gone.
   */
  async sleep(box: BoxHandle): Promise<SleepState> {
    await this.kill(box);
    const marker = join(box.dir, BOX_FILES.asleep);
    writeFileSync(`${marker}.tmp`, JSON.stringify({ keeps: "disk", at: new Date().toISOString() }));
    renameSync(`${marker}.tmp`, marker);
    return { keeps: "disk", bytes: 0 };
  }

  /** A process box wakes by starting again: its programs were stopped, so it is never a cold boot it did not expect. */
  async wake(box: BoxHandle): Promise<{ cold: string | null }> {
    if (!(await this.inspect(box)).running) await this.start(box);
    await this.forgetSleep(box);
    return { cold: null };
  }

  sleeping(box: BoxHandle): SleepState | null {
    return existsSync(join(box.dir, BOX_FILES.asleep)) ? { keeps: "disk", bytes: 0 } : null;
  }

  /** Its directory moves to the new id's: an asleep box's disk is unmounted, and its wake starts it afresh under its new name and id. */
  async rehome(from: BoxHandle, to: BoxHandle): Promise<void> {
    if ((await this.inspect(from)).running)
      throw new HutchError("conflict", `box "${from.name}" is running; only an asleep box moves`, "sleep it first");
    if (isMountPoint(join(from.dir, DISK_FILES.mount))) await unmountDisk(from.dir);
    if (existsSync(to.dir)) throw new HutchError("conflict", `${to.dir} exists already`, `delete box ${to.name} first`);
    renameSync(from.dir, to.dir);
  }

  async forgetSleep(box: BoxHandle): Promise<void> {
    rmSync(join(box.dir, BOX_FILES.asleep), { force: true });
  }

  async sleepDetail(): Promise<string> {
    if (!Bun.which("criu"))
      return "stops the box's programs and keeps its disk (criu is not installed); agents resume their conversation on wake";
    const check = Bun.spawnSync(["criu", "check"], { stdout: "pipe", stderr: "pipe" });
    const why =
      (check.stderr.toString() + check.stdout.toString())
        .trim()
        .split("\n")
        .find((l) => /Error/.test(l)) ?? `exit ${check.exitCode}`;
    return `stops the box's programs and keeps its disk; agents resume their conversation on wake (CRIU is not used${check.exitCode === 0 ? "" : `, and \`criu check\` fails here: ${why}`})`;
  }

  async kill(box: BoxHandle, opts: { own?: boolean } = {}): Promise<void> {
    const id = readPid(box);
    // Killing the sandbox's pid-namespace init takes every process in the box with it.
    await killBox(box.id, id, join(box.dir, BOX_FILES.pid), id ? childrenOf(id.pid) : [], !opts.own);
    if (!opts.own) await this.release(box);
    else await unmountDisk(box.dir);
  }

  /** What a stopped box no longer needs on the host: its cgroups and its mounted disk. */
  private async release(box: BoxHandle): Promise<void> {
    const cg = this.cgroup(box);
    const left = (await cg?.remove()) ?? [];
    if (left.length > 0) logger.warn("box cgroups still busy", { box: box.name, groups: left.join(" ") });
    await unmountDisk(box.dir);
  }

  async openRoots(box: BoxHandle): Promise<{ roots: { name: "workspace" | "home"; path: string }[]; release(): Promise<void> }> {
    const r = boxRoots(box.dir);
    const mounted = r.quota ? await mountReadOnly(box.dir) : false;
    const roots = [
      { name: "workspace" as const, path: r.workspace },
      { name: "home" as const, path: r.home },
    ].filter((x) => existsSync(x.path));
    return { roots, release: async () => (mounted ? unmountDisk(box.dir) : undefined) };
  }

  async inspect(box: BoxHandle): Promise<Observed> {
    const id = readPid(box);
    if (id && isAlive(id)) return { running: true, pid: id.pid };
    return { running: false };
  }

  channel(box: BoxHandle): ChannelEndpoint {
    return { kind: "unix", path: join(boxRoots(box.dir).run, BOX_FILES.socket), peerPid: guestPid(box) ?? 0 };
  }

  async destroy(box: BoxHandle, opts: { own?: boolean } = {}): Promise<void> {
    if (opts.own) await unmountDisk(box.dir);
    else await this.release(box);
    // Never through a mounted disk: rm would empty the box's filesystem and then fail on its mount point.
    if (isMountPoint(join(box.dir, DISK_FILES.mount)))
      throw new HutchError(
        "failed",
        `the box's disk is still mounted at ${join(box.dir, DISK_FILES.mount)}`,
        `unmount it: umount ${join(box.dir, DISK_FILES.mount)}`,
      );
    rmSync(box.dir, { recursive: true, force: true });
  }

  async leftovers(box: BoxHandle): Promise<string[]> {
    const left = boxLeftovers(box.id, box.dir);
    if (isMountPoint(join(box.dir, DISK_FILES.mount))) left.push(`mount ${join(box.dir, DISK_FILES.mount)}`);
    for (const d of this.cgroup(box)?.existing() ?? []) left.push(`cgroup ${d}`);
    return left;
  }

  async helloTimeoutMs(): Promise<number> {
    return env.helloTimeoutMs() ?? 10_000;
  }

  async consoleTail(box: BoxHandle, lines = 20): Promise<string> {
    return consoleTailOf(join(box.dir, BOX_FILES.console), lines);
  }
}
