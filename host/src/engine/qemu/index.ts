// The QEMU engine: each box a VM booting the image's kernel and initramfs,
// with a qcow2 overlay over the read-only root disk, the guest binary on a
// read-only disk of its own, and the agent channel on a virtio-serial port
// (see image/BOOT.md). QEMU runs detached from the daemon; a restarted daemon
// finds it by pidfile (pid + start time + its box id on the command line).
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { HutchError } from "@hutch/shared";
import type {
  BoxHandle,
  ChannelEndpoint,
  Engine,
  EngineCapabilities,
  LimitReport,
  Observed,
  ProbeResult,
  SleepState,
  StartedFrom,
} from "../types.ts";
import { boxLeftovers, isAlive, killBox, procStartTime, readIdentity, waitGone, type ProcIdentity } from "../pidfile.ts";
import { guestBinary } from "../guest-binary.ts";
import { qemuArgs, type Arch, type Platform } from "./args.ts";
import { qmp, type QmpStatus } from "./qmp.ts";
import { commitState, migrateOut, receiveState, stateProblem, syncDir } from "./sleep.ts";
import { type BootedState, bootedKey, dropBooted, findBooted, keepBooted, listBooted, seenBooted } from "./booted.ts";
import { chooseAccel, currentAccel, resolveAccel } from "./accel.ts";
import { env } from "../../env.ts";
import { ensureGuestDisk } from "../../image/guest-disk.ts";
import { imageFiles, imagePaths, loadImage, movedBuild, overlayBacking, validateManifest, type Manifest } from "../../image/index.ts";
import { log } from "../../log.ts";
import { BoxCgroup, describePlan, hostCgroups, type CgroupPlan, type Limits } from "../cgroup.ts";
import { boxIdentity, readIdentityFile } from "../idmap.ts";
import { readConsoleEnd, stripControls, trimConsole } from "../console.ts";
import { agentDisks } from "../agent-disks.ts";
import { ENGINE_FILES } from "../box-files.ts";
import { formatSize, parseSize } from "../limits.ts";
import { virtualBytes } from "../../image/disk.ts";

const logger = log.create({ service: "engine.qemu" });

/** File names inside $HUTCH_HOME/boxes/<id>/ (listed in host/README.md). */
export const VM_FILES = {
  ...ENGINE_FILES,
  qemuPid: "qemu.pid",
  disk: "disk.qcow2",
  qmp: "qmp.sock",
  qemuLog: "qemu.log",
  /** The command line the VM was started with: a wake must give QEMU the very same devices. */
  argv: "qemu.argv.json",
  /** The VM's memory and device state while it sleeps (sleep.ts), and its parts while written. */
  sleepState: "sleep.state",
  sleepTmp: "sleep.state.tmp",
} as const;

export interface VmConfig {
  image: string;
  cpus: number;
  memoryMiB: number;
  /** Virtual size of the overlay, e.g. "20G"; the image's size when absent. */
  disk?: string;
  /** Appended to the kernel command line. */
  kernelArgs?: string;
}

export const DEFAULT_VM: VmConfig = { image: "default", cpus: 2, memoryMiB: 1024 };

/**
 * The cgroup limits of a VM's QEMU process: the guest's RAM plus QEMU's own
 * (tcg's translation buffer grows towards 1 GiB; with an accelerator QEMU
 * needs far less), and a thread cap (vCPUs, I/O workers) no working VM comes
 * near. The guest itself is bounded by its RAM and vCPUs; these bound QEMU
 * going wrong. No CPU cap: the vCPU count is one, and a cpu group of its own
 * would cost the scheduler for nothing (./cgroup.ts).
 */
export function qemuLimits(cfg: VmConfig, accel: string): Limits {
  const overheadMiB = accel === "tcg" ? 1280 : 512;
  return { memoryBytes: (cfg.memoryMiB + overheadMiB) * 1024 * 1024, pids: 512 };
}

function tail(path: string, lines: number): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

function run(argv: string[]): { ok: boolean; out: string } {
  const p = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" });
  return { ok: p.exitCode === 0, out: (p.stderr.toString() + p.stdout.toString()).trim() };
}

/** QEMU's fds for its root disk when it gets it open (args.ts rootDiskFds): the ones after stdin, stdout and stderr. */
export const ROOT_DISK_FDS: [number, number] = [3, 4];

/** How often the console logs are measured: a VM writes its serial port at most a few MB/s under KVM. */
const CONSOLE_CHECK_MS = 1000;

export const QEMU_CAPABILITIES: EngineCapabilities = {
  isolation: "vm",
  pause: true,
  memorySnapshot: false,
  screenshot: false,
  agentsAtBoot: true,
  sleep: "memory",
};

export class QemuEngine implements Engine {
  readonly name = "qemu" as const;
  readonly capabilities = QEMU_CAPABILITIES;

  constructor(
    private readonly home: string,
    private readonly host: { platform: Platform; arch: Arch } = {
      platform: process.platform === "darwin" ? "darwin" : process.platform === "win32" ? "windows" : "linux",
      arch: process.arch === "arm64" ? "aarch64" : "x86_64",
    },
    private readonly cgroups: () => CgroupPlan = hostCgroups,
  ) {}

  private trimmer: ReturnType<typeof setInterval> | null = null;

  /**
   * Keeps every VM's console log within its budget, whoever started the VM
   * (this daemon, or one before it): a VM's root writes its serial console
   * without limit, and QEMU appends it to a host file (append=on). Started by
   * the first start or inspect (adoption after a restart inspects every box).
   */
  private watchConsoles(): void {
    if (this.trimmer) return;
    const boxes = join(this.home, "boxes");
    const budget = env.consoleMaxBytes();
    this.trimmer = setInterval(() => {
      let dirs: string[];
      try {
        dirs = readdirSync(boxes);
      } catch {
        return;
      }
      for (const d of dirs)
        if (trimConsole(join(boxes, d, VM_FILES.console), budget))
          logger.warn("console log over its budget: kept its tail", { id: d, budget });
    }, CONSOLE_CHECK_MS);
    this.trimmer.unref();
  }

  private binary(): string {
    return `qemu-system-${this.host.arch}`;
  }

  async probe(): Promise<ProbeResult> {
    if (!Bun.which(this.binary()) || !Bun.which("qemu-img")) {
      return {
        ok: false,
        engine: "qemu",
        detail: `${this.binary()} or qemu-img is not installed`,
        fix: "apt-get install -y qemu-system-x86 qemu-utils",
      };
    }
    const img = imagePaths(this.home, "default");
    if (!existsSync(img.manifest)) return { ok: false, engine: "qemu", detail: "no VM image yet", fix: "hutch image build" };
    return { ok: true, engine: "qemu", detail: `${this.binary()} and the default image are present` };
  }

  /** On this host's platform and architecture: the accelerator proof is the daemon's alone. */
  proveAccelerators() {
    return chooseAccel(this.home, this.host.platform, this.host.arch);
  }

  config(box: BoxHandle): VmConfig {
    return { ...DEFAULT_VM, ...(box.config as Partial<VmConfig>) };
  }

  async helloTimeoutMs(): Promise<number> {
    // Under tcg a boot takes seconds where kvm takes well under one.
    return env.helloTimeoutMs() ?? ((await resolveAccel(this.home, this.host.platform, this.host.arch)).accel === "tcg" ? 120_000 : 30_000);
  }

  describe(box: BoxHandle): Record<string, string> {
    const cfg = this.config(box);
    const accel = currentAccel(this.home);
    const lim = qemuLimits(cfg, accel?.accel ?? "kvm");
    const plan = this.cgroups();
    const cap = (ok: boolean, what: string) => (this.host.platform === "linux" && ok ? what : "not enforced on this host: hutch doctor");
    const id = readIdentityFile(box.dir);
    return {
      image: cfg.image,
      cpus: String(cfg.cpus),
      memory: `${cfg.memoryMiB} MiB`,
      ...(cfg.disk ? { disk: cfg.disk } : {}),
      "qemu process": `memory ${formatSize(lim.memoryBytes!)} (${cap(plan.memory.ok, "capped")}), ${lim.pids} threads (${cap(plan.pids.ok, "capped")})`,
      ...(id ? { "host uid": String(id.uid) } : {}),
      ...(accel ? { accel: accel.accel, "accel reason": accel.reason } : {}),
    };
  }

  limits(): LimitReport[] {
    if (this.host.platform !== "linux")
      return [
        {
          name: "qemu process cgroup",
          enforced: false,
          detail: `cgroups are a Linux feature; on ${this.host.platform} the VM's RAM and vCPUs are its limits`,
        },
      ];
    const plan = describePlan(this.cgroups());
    const all = plan.memory.enforced && plan.pids.enforced;
    const root = process.getuid?.() === 0;
    return [
      {
        name: "vm memory, cpus, disk",
        enforced: true,
        detail: "a VM has the RAM and vCPUs it is given, and its overlay disk cannot grow past its size",
      },
      {
        name: "qemu process cgroup",
        enforced: all,
        detail: all
          ? "QEMU runs in the box's own cgroups (memory, threads)"
          : `not all enforced: ${Object.entries(plan)
              .filter(([k, v]) => k !== "cpu" && !v.enforced)
              .map(([k, v]) => `${k}: ${v.detail}`)
              .join("; ")}`,
        ...(all ? {} : { fix: "run the daemon as root, or as a systemd service with Delegate=yes (cgroup v2)" }),
      },
      root
        ? {
            name: "qemu identity",
            enforced: true,
            detail: "QEMU drops to the box's own unprivileged host uid (-runas) once its files are open",
          }
        : { name: "qemu identity", enforced: true, detail: "QEMU runs as the daemon's own user (it is not root)" },
    ];
  }

  async create(box: BoxHandle): Promise<void> {
    mkdirSync(box.dir, { recursive: true });
    const cfg = this.config(box);
    loadImage(this.home, cfg.image);
    const image = imagePaths(this.home, cfg.image);
    const disk = join(box.dir, VM_FILES.disk);
    if (existsSync(disk)) return;
    const tmp = `${disk}.tmp`;
    const r = run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", image.root, tmp, ...(cfg.disk ? [cfg.disk] : [])]);
    if (!r.ok) {
      rmSync(tmp, { force: true });
      throw new HutchError(
        "failed",
        `could not create the box's disk over image "${cfg.image}": ${r.out}`,
        `check the image: hutch image list (rebuild: hutch image build --force)`,
      );
    }
    // Renamed only once complete, so a crash never leaves a half-made overlay.
    renameSync(tmp, disk);
  }

  /**
   * The image build the box's overlay backs onto: what it boots, whatever its
   * image name points at now (a rebuild or an rm never changes it). A backing
   * build that moved into the store when its plain directory was replaced is
   * found by where it came from, and the overlay is pointed at it.
   */
  private bootImage(box: BoxHandle): { files: ReturnType<typeof imageFiles>; manifest: Manifest } {
    const disk = join(box.dir, VM_FILES.disk);
    const backing = overlayBacking(disk);
    if (!backing)
      throw new HutchError(
        "failed",
        `the box's disk ${disk} names no base image`,
        `recreate the box: hutch box delete ${box.name} && hutch box create ${box.name} --engine qemu`,
      );
    let dir = dirname(backing);
    // An overlay made before its image's plain directory was replaced names that directory, where the new
    // build's name now points: the build it was made on is the one that moved, whatever is there now.
    const moved = movedBuild(this.home, dir);
    if (!moved && !existsSync(backing)) {
      throw new HutchError(
        "not_found",
        `the image the box was built on is gone (${dir})`,
        `recreate the box: hutch box delete ${box.name} && hutch box create ${box.name} --engine qemu`,
      );
    }
    if (moved) {
      const r = run(["qemu-img", "rebase", "-u", "-F", "qcow2", "-b", imageFiles(moved).root, disk]);
      if (!r.ok)
        throw new HutchError("failed", `could not point the box's disk at its moved image: ${r.out}`, `see: qemu-img info ${disk}`);
      logger.info("box disk follows its moved image", { box: box.name, from: dir, to: moved });
      dir = moved;
    }
    const files = imageFiles(dir);
    const manifest = validateManifest(JSON.parse(readFileSync(files.manifest, "utf8")), `the image under box "${box.name}"`);
    return { files, manifest };
  }

  /**
   * A fresh boot, or on a box's first start (it has never run: no command
   * line saved) the booted state of its shape loaded instead, when one is
   * kept (booted.ts). A box that boots says whether a state of its shape is
   * wanted: the second box of a shape to boot asks for one.
   */
  async start(box: BoxHandle): Promise<StartedFrom> {
    // A start is a fresh boot: a sleeping state left from before is stale against the disk from here on.
    await this.forgetSleep(box);
    const first = !existsSync(join(box.dir, VM_FILES.argv));
    const argv = await this.argv(box);
    const key = first ? this.bootedKeyOf(box, argv) : null;
    let booted: StartedFrom["booted"] = null;
    if (key) {
      const kept = findBooted(this.home, key);
      if (kept && (await this.startFrom(box, argv, kept))) booted = "loaded";
      else if (seenBooted(this.home, key)) booted = "wanted";
    }
    if (booted !== "loaded") await this.launch(box, argv);
    writeFileSync(join(box.dir, VM_FILES.argv), JSON.stringify(argv));
    return { booted };
  }

  /** The key of the booted state a box with this command line would load or keep; null when it has none (no vmgenid, no image). */
  private bootedKeyOf(box: BoxHandle, argv: string[]): string | null {
    const backing = overlayBacking(join(box.dir, VM_FILES.disk));
    if (!backing) return null;
    let manifest: string;
    try {
      manifest = readFileSync(imageFiles(dirname(backing)).manifest, "utf8");
    } catch {
      return null;
    }
    return bootedKey(argv, { home: this.home, dir: box.dir, id: box.id, name: box.name }, manifest, this.config(box).disk);
  }

  /**
   * The box's disk becomes a copy of the booted state's (pointed at this
   * box's own image file), and QEMU starts with the box's command line and
   * loads the state. False when that fails, with the box's fresh disk back
   * and no QEMU left, to boot as usual; a state QEMU would not load is
   * removed (the next boxes of its shape boot, and a new one is made).
   */
  private async startFrom(box: BoxHandle, argv: string[], kept: BootedState): Promise<boolean> {
    const disk = join(box.dir, VM_FILES.disk);
    const backing = overlayBacking(disk);
    const copy = `${disk}.booted`;
    const fresh = `${disk}.fresh`;
    try {
      if (!backing) throw new Error("the box's disk names no base image");
      copyFileSync(kept.disk, copy);
      const r = run(["qemu-img", "rebase", "-u", "-F", "qcow2", "-b", backing, copy]);
      if (!r.ok) throw new Error(r.out);
    } catch (err) {
      rmSync(copy, { force: true });
      logger.warn("could not copy a booted state's disk; the box boots", { box: box.name, err: String(err) });
      return false;
    }
    renameSync(disk, fresh);
    renameSync(copy, disk);
    const qmpSock = join(box.dir, VM_FILES.qmp);
    let problem: string | null;
    const fd = openSync(kept.state, "r");
    try {
      await this.launch(box, [...argv, "-incoming", "fd:0", "-S"], fd);
      problem = await this.incomingDone(box, qmpSock);
      if (problem === null) await qmp(qmpSock, "cont");
    } catch (err) {
      problem = (err as Error).message;
    } finally {
      closeSync(fd);
    }
    if (problem !== null) {
      await this.kill(box);
      renameSync(fresh, disk);
      dropBooted(this.home, kept.key);
      logger.warn("QEMU could not load a booted state: it is removed, and the box boots", { box: box.name, problem });
      return false;
    }
    rmSync(fresh, { force: true });
    logger.info("VM started from a booted state", { box: box.name, key: kept.key, made: kept.made });
    return true;
  }

  async keepBooted(box: BoxHandle): Promise<boolean> {
    const id = this.identity(box);
    if (id && isAlive(id))
      throw new HutchError("conflict", `box "${box.name}" is running; only an asleep box's state is kept`, "sleep it first");
    const state = join(box.dir, VM_FILES.sleepState);
    const saved = this.savedArgv(box);
    if (!saved || stateProblem(state)) return false;
    const key = this.bootedKeyOf(box, saved);
    if (!key) return false;
    const kept = keepBooted(this.home, key, box, { state, disk: join(box.dir, VM_FILES.disk) });
    logger.info(kept ? "booted state kept" : "a booted state of this shape was kept meanwhile; this one goes", { box: box.name, key });
    return kept;
  }

  /** The VM's command line for a fresh boot, with its disks prepared. */
  private async argv(box: BoxHandle): Promise<string[]> {
    this.watchConsoles();
    await this.create(box);
    const cfg = this.config(box);
    await this.resize(box, cfg);
    const { files: image, manifest } = this.bootImage(box);
    const guest = await guestBinary(this.home);
    const guestDisk = await ensureGuestDisk(this.home, guest.path, guest.sha);
    const id = this.runAs(box);
    const accel = await resolveAccel(this.home, this.host.platform, this.host.arch);
    const argv = qemuArgs({
      ...this.host,
      accel: accel.accel,
      boxId: box.id,
      name: box.name,
      cpus: cfg.cpus,
      memoryMiB: cfg.memoryMiB,
      kernel: image.kernel,
      initrd: image.initramfs,
      cmdline: cfg.kernelArgs ?? "",
      rootDisk: join(box.dir, VM_FILES.disk),
      guestDisk,
      guestDiskBytes: statSync(guestDisk).size,
      imageHasPmem: manifest.modules.includes("virtio_pmem.ko"),
      agent: join(box.dir, VM_FILES.socket),
      qmp: join(box.dir, VM_FILES.qmp),
      consoleLog: join(box.dir, VM_FILES.console),
      pidfile: join(box.dir, VM_FILES.qemuPid),
      ...(id ? { runAs: { uid: id.uid, gid: id.gid }, rootDiskFds: ROOT_DISK_FDS } : {}),
      agentDisks: await agentDisks(env.agentsDir(this.home)),
    });
    return argv;
  }

  /** Starts QEMU with `argv` (its stdin the sleeping state, when it restores one) and waits for QMP to answer. */
  private async launch(box: BoxHandle, argv: string[], stdin?: number): Promise<void> {
    const cfg = this.config(box);
    const accel = await resolveAccel(this.home, this.host.platform, this.host.arch);
    for (const f of [VM_FILES.socket, VM_FILES.qmp, VM_FILES.qemuPid]) rmSync(join(box.dir, f), { force: true });
    const cg = this.cgroup(box);
    cg?.create(qemuLimits(cfg, accel.accel));
    if (accel.accel === "tcg") logger.warn("booting under tcg (software emulation): slow", { box: box.name, reason: accel.reason });
    const logFd = openSync(join(box.dir, VM_FILES.qemuLog), "w");
    const disk = join(box.dir, VM_FILES.disk);
    const diskFds = argv.some((a) => a.includes("/dev/fdset/1")) ? [openSync(disk, "r+"), openSync(disk, "r")] : [];
    let proc: ReturnType<typeof Bun.spawn>;
    try {
      proc = Bun.spawn(argv, {
        stdio: [stdin ?? "ignore", logFd, logFd, ...diskFds],
        detached: true,
        env: { PATH: env.path() ?? "/usr/bin:/bin", HUTCH_BOX_ID: box.id },
      });
    } finally {
      for (const fd of [logFd, ...diskFds]) closeSync(fd);
    }
    proc.unref();
    // At once: QEMU has touched little of its memory yet, and every thread it starts later is born in the group.
    try {
      cg?.attach(proc.pid);
    } catch (err) {
      proc.kill("SIGKILL");
      throw new HutchError("failed", `could not put the VM in its cgroups: ${(err as Error).message}`, "check the host: hutch doctor");
    }
    // Ready when QMP answers. Until then the spawn handle says whether QEMU lives:
    // right after spawn the pid may not show QEMU's command line yet.
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (proc.exitCode !== null || proc.signalCode) {
        const how = proc.signalCode ? `killed by ${proc.signalCode}` : `exit ${proc.exitCode}`;
        throw new HutchError(
          "failed",
          `QEMU exited while starting (${how}): ${tail(join(box.dir, VM_FILES.qemuLog), 5) || "no output"}`,
          `see ${join(box.dir, VM_FILES.qemuLog)}`,
        );
      }
      const status = await qmp<QmpStatus>(join(box.dir, VM_FILES.qmp), "query-status", undefined, 1000).catch(() => null);
      if (status) break;
      if (Date.now() > deadline) {
        proc.kill("SIGKILL");
        throw new HutchError("failed", "QEMU did not answer on its QMP socket", `see ${join(box.dir, VM_FILES.qemuLog)}`);
      }
      await Bun.sleep(50);
    }
    // Now it is surely QEMU: record who it is, so a restarted daemon can find it.
    const startTime = procStartTime(proc.pid);
    if (startTime) writeFileSync(join(box.dir, VM_FILES.pid), JSON.stringify({ pid: proc.pid, startTime }));
    logger.info("VM started", { box: box.name, pid: proc.pid, accel: accel.accel });
  }

  /** The box's own host identity QEMU drops to (Linux, daemon is root), or null. */
  private runAs(box: BoxHandle): { uid: number; gid: number } | null {
    return this.host.platform === "linux" && process.getuid?.() === 0 ? boxIdentity(join(this.home, "boxes"), box.id) : null;
  }

  sleeping(box: BoxHandle): SleepState | null {
    try {
      return { keeps: "memory", bytes: statSync(join(box.dir, VM_FILES.sleepState)).blocks * 512 };
    } catch {
      return null;
    }
  }

  async sleepDetail(): Promise<string> {
    const booted = listBooted(this.home);
    const mib = Math.round(booted.reduce((n, b) => n + b.bytes, 0) / 1024 ** 2);
    return `keeps the VM's memory and devices: its programs carry on after a wake (the state is a file in the box's directory); ${
      booted.length === 0
        ? "no booted state kept yet (the second box of a shape to boot has one made, and later boxes of that shape load it instead of booting)"
        : `${booted.length} booted state${booted.length === 1 ? "" : "s"} kept (${mib} MiB in images/.booted): a box's first start loads its shape's instead of booting`
    }`;
  }

  async forgetSleep(box: BoxHandle): Promise<void> {
    for (const f of [VM_FILES.sleepState, VM_FILES.sleepTmp]) rmSync(join(box.dir, f), { force: true });
  }

  /**
   * Stop the vCPUs, stream the state to a file (sleep.ts: temporary, fsynced,
   * renamed), then quit QEMU. A crash at any step leaves QEMU holding the
   * paused guest or the whole state on disk, and running this again finishes
   * the job. A failed save resumes the guest and throws: the box runs on.
   */
  async sleep(box: BoxHandle): Promise<SleepState> {
    const id = this.identity(box);
    const state = join(box.dir, VM_FILES.sleepState);
    if (!id || !isAlive(id)) {
      const have = this.sleeping(box);
      if (have) return have;
      throw new HutchError("not_ready", `box "${box.name}" is not running, so it cannot sleep`, `start it: hutch box start ${box.name}`);
    }
    const qmpSock = join(box.dir, VM_FILES.qmp);
    const status = await qmp<QmpStatus>(qmpSock, "query-status");
    // postmigrate: a save completed and the guest has not run since, so the state on disk is still its state.
    if (status.status !== "postmigrate" || stateProblem(state)) {
      // Stopped first, the guest touches no memory while it is saved: every page is written once, and none moves on.
      await qmp(qmpSock, "stop");
      const tmp = join(box.dir, VM_FILES.sleepTmp);
      const rx = await receiveState(tmp, id.pid, this.runAs(box) ?? undefined);
      try {
        await migrateOut(qmpSock, `unix:${rx.sock}`, 600_000);
        await rx.done;
      } catch (err) {
        rx.close();
        rmSync(tmp, { force: true });
        await qmp(qmpSock, "cont").catch(() => undefined);
        throw err;
      }
      commitState(tmp, state);
    }
    await qmp(qmpSock, "quit").catch(() => undefined);
    if (!(await waitGone(id, 10_000))) await killBox(box.id, id, join(box.dir, VM_FILES.pid));
    for (const f of [VM_FILES.pid, VM_FILES.qemuPid, VM_FILES.qmp, VM_FILES.socket]) rmSync(join(box.dir, f), { force: true });
    await this.release(box);
    return this.sleeping(box)!;
  }

  /**
   * Restores the VM from its state: QEMU started with the same command line,
   * `-incoming fd:0` (stdin is the state) and `-S`, so the guest waits until
   * the state is deleted: the disk moves on from then, and the state must not
   * be loaded again. A QEMU found alive (a wake or a sleep a crash cut short)
   * is finished the same way. A state QEMU cannot load gives a cold boot.
   */
  async wake(box: BoxHandle): Promise<{ cold: string | null }> {
    const state = join(box.dir, VM_FILES.sleepState);
    const qmpSock = join(box.dir, VM_FILES.qmp);
    const live = this.identity(box);
    if (!live || !isAlive(live)) {
      // A QEMU a crash left unrecorded (killed before its pidfile was written) holds the disk: it goes first.
      await killBox(box.id, null, join(box.dir, VM_FILES.pid));
      const problem = stateProblem(state);
      const saved = this.savedArgv(box);
      if (problem || !saved) {
        await this.start(box);
        return { cold: problem ?? "the VM's command line from before its sleep is missing" };
      }
      const fd = openSync(state, "r");
      try {
        await this.launch(box, [...saved, "-incoming", "fd:0", "-S"], fd);
      } catch (err) {
        await this.start(box);
        return { cold: `QEMU could not restore the sleeping state: ${(err as Error).message}` };
      } finally {
        closeSync(fd);
      }
    }
    const loaded = await this.incomingDone(box, qmpSock);
    if (loaded) {
      await this.kill(box);
      await this.start(box);
      return { cold: `QEMU could not load the sleeping state: ${loaded}` };
    }
    await this.forgetSleep(box);
    syncDir(box.dir);
    await qmp(qmpSock, "cont");
    return { cold: null };
  }

  /** Waits while QEMU loads an incoming state; null once the guest is loaded (paused), else what went wrong. */
  private async incomingDone(box: BoxHandle, qmpSock: string): Promise<string | null> {
    for (;;) {
      const id = this.identity(box);
      if (!id || !isAlive(id)) return tail(join(box.dir, VM_FILES.qemuLog), 3) || "QEMU exited";
      const status = await qmp<QmpStatus>(qmpSock, "query-status").catch(() => null);
      if (status && status.status !== "inmigrate") return null;
      await Bun.sleep(20);
    }
  }

  /**
   * The directory moves to the new id's, and the command line a wake gives
   * QEMU names the new id where it named the old (its files' paths, and the
   * `process=hutch-<id>` a restarted daemon finds it by): the same devices,
   * so the saved state loads. The guest still has the old name and id until
   * the host tells it (the identity message on its next connection); the
   * kernel command line is only read at boot, and a cold boot builds a new one.
   */
  async rehome(from: BoxHandle, to: BoxHandle): Promise<void> {
    if (this.identity(from)) throw new HutchError("conflict", `box "${from.name}" is running; only an asleep box moves`, "sleep it first");
    if (existsSync(to.dir)) throw new HutchError("conflict", `${to.dir} exists already`, `delete box ${to.name} first`);
    const saved = this.savedArgv(from);
    renameSync(from.dir, to.dir);
    if (saved) {
      const tmp = join(to.dir, `${VM_FILES.argv}.tmp`);
      writeFileSync(tmp, JSON.stringify(saved.map((a) => a.replaceAll(from.id, to.id))));
      renameSync(tmp, join(to.dir, VM_FILES.argv));
    }
    syncDir(dirname(to.dir));
  }

  private savedArgv(box: BoxHandle): string[] | null {
    try {
      const argv = JSON.parse(readFileSync(join(box.dir, VM_FILES.argv), "utf8")) as unknown;
      return Array.isArray(argv) && argv.every((a) => typeof a === "string") ? argv : null;
    } catch {
      return null;
    }
  }

  /** A `box set --disk` since the overlay was made: grown with qemu-img (a qcow2 overlay cannot shrink under its guest's filesystem). */
  private async resize(box: BoxHandle, cfg: VmConfig): Promise<void> {
    if (!cfg.disk) return;
    const disk = join(box.dir, VM_FILES.disk);
    const want = parseSize(cfg.disk);
    const have = await virtualBytes(disk);
    if (want === have) return;
    if (want < have)
      throw new HutchError(
        "invalid",
        `a VM's disk cannot shrink (it is ${formatSize(have)}, asked for ${cfg.disk})`,
        `set a size of at least ${formatSize(have)}: hutch box set ${box.name} --disk ${Math.ceil(have / 1024 ** 3)}G`,
      );
    const r = run(["qemu-img", "resize", "-q", "-f", "qcow2", disk, String(want)]);
    if (!r.ok) throw new HutchError("failed", `could not grow the box's disk: ${r.out}`, `see: qemu-img info ${disk}`);
    logger.info("VM disk grown", { box: box.name, from: have, to: want });
  }

  async stop(box: BoxHandle, timeoutMs: number, requestShutdown: () => void): Promise<{ forced: boolean }> {
    const id = this.identity(box);
    if (!id || !isAlive(id)) return { forced: false };
    requestShutdown();
    // ACPI too, for a guest that is not listening on its channel.
    await qmp(join(box.dir, VM_FILES.qmp), "system_powerdown").catch(() => undefined);
    if (await waitGone(id, timeoutMs)) {
      await this.release(box);
      return { forced: false };
    }
    logger.warn("VM did not power off in time; killing it", { box: box.name, timeoutMs });
    await this.kill(box);
    return { forced: true };
  }

  async kill(box: BoxHandle, opts: { own?: boolean } = {}): Promise<void> {
    await killBox(box.id, this.identity(box), join(box.dir, VM_FILES.pid), [], !opts.own);
    if (!opts.own) await this.release(box);
  }

  private cgroup(box: BoxHandle): BoxCgroup | null {
    if (this.host.platform !== "linux") return null;
    const plan = this.cgroups();
    return Object.values(plan).some((p) => p.ok) ? new BoxCgroup(plan, box.id) : null;
  }

  /** The VM's cgroups go once QEMU is gone. */
  private async release(box: BoxHandle): Promise<void> {
    const left = (await this.cgroup(box)?.remove()) ?? [];
    if (left.length > 0) logger.warn("VM cgroups still busy", { box: box.name, groups: left.join(" ") });
  }

  async pause(box: BoxHandle): Promise<void> {
    await qmp(join(box.dir, VM_FILES.qmp), "stop");
  }

  async resume(box: BoxHandle): Promise<void> {
    await qmp(join(box.dir, VM_FILES.qmp), "cont");
  }

  async inspect(box: BoxHandle): Promise<Observed> {
    this.watchConsoles();
    const id = this.identity(box);
    if (!id || !isAlive(id)) return { running: false };
    const status = await qmp<QmpStatus>(join(box.dir, VM_FILES.qmp), "query-status", undefined, 2000).catch(() => null);
    return { running: true, pid: id.pid, ...(status && !status.running && status.status === "paused" ? { paused: true } : {}) };
  }

  channel(box: BoxHandle): ChannelEndpoint {
    return { kind: "unix", path: join(box.dir, VM_FILES.socket), leftovers: true };
  }

  async destroy(box: BoxHandle): Promise<void> {
    rmSync(box.dir, { recursive: true, force: true });
  }

  async leftovers(box: BoxHandle): Promise<string[]> {
    return [...boxLeftovers(box.id, box.dir), ...(this.cgroup(box)?.existing() ?? []).map((d) => `cgroup ${d}`)];
  }

  async consoleTail(box: BoxHandle, lines = 20): Promise<string> {
    // A panic's stack trace fills any tail: keep the line that says what happened.
    let all = readConsoleEnd(join(box.dir, VM_FILES.console)) ?? "";
    all = stripControls(all);
    const last = all.trimEnd().split("\n").slice(-lines);
    const cause = all.split("\n").filter((l) => /Kernel panic|hutch-init:|not syncing/.test(l) && !last.includes(l));
    const console = [...cause.map((l) => l.trimEnd()), ...(cause.length ? ["…"] : []), ...last].join("\n");
    const qemuOut = tail(join(box.dir, VM_FILES.qemuLog), 5);
    return [console || "(console log is empty)", qemuOut ? `qemu: ${qemuOut}` : ""].filter(Boolean).join("\n");
  }

  /** The VM's process, if its pidfile names a live QEMU of this box (not a recycled pid). */
  private identity(box: BoxHandle): ProcIdentity | null {
    const id = readIdentity(join(box.dir, VM_FILES.pid));
    if (!id) return null;
    try {
      if (!readFileSync(`/proc/${id.pid}/cmdline`, "utf8").includes(`process=hutch-${box.id}`)) return null;
    } catch {
      return null;
    }
    return id;
  }
}
