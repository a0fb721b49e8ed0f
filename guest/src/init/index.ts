// The part of init that /init (busybox, in the initramfs) leaves to the
// guest: see image/BOOT.md. Runs only when the guest is PID 1.
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import type { Logger } from "../log.ts";
import { parseCmdline } from "./cmdline.ts";
import {
  disableCtrlAltDel,
  EBUSY,
  interfaceUp,
  mount,
  MNT_DETACH,
  MS_NODEV,
  MS_NOSUID,
  MS_RDONLY,
  peekExited,
  powerOffNow,
  reapPid,
  remountReadOnly,
  sethostname,
  SysError,
  sync,
  umount,
} from "./ffi.ts";
import { BOX_MOUNTS, mountPoints, unmountOrder } from "./mounts.ts";

export const GUEST_HOME = "/home/hutch";
export const GUEST_WORKSPACE = "/workspace";

/**
 * What being this process's pid means: "vm" is PID 1 of a machine (mounts,
 * power-off, must never exit); "sandbox" is PID 1 of a process box's pid
 * namespace (reaps orphans; its exit ends the box); "none" is any other pid.
 * The process engine names its role: a VM's PID 1 gets its environment from
 * the kernel, which never sets HUTCH_GUEST_INIT.
 */
export function initRole(pid: number, env: NodeJS.ProcessEnv): "vm" | "sandbox" | "none" {
  if (pid !== 1) return "none";
  return env.HUTCH_GUEST_INIT === "sandbox" ? "sandbox" : "vm";
}

/**
 * Mounts, hostname, lo, and the environment the guest configures itself from
 * (and hands its processes). Failures are logged and skipped: a box without
 * /dev/shm is still more use to the host than a box that powered off.
 */
export function prepareBox(log: Logger, inherited: NodeJS.ProcessEnv): Record<string, string> {
  const t0 = performance.now();
  const step = (what: string, run: () => void) => {
    try {
      run();
    } catch (err) {
      log.error(`init: ${what} failed`, { error: (err as Error).message });
    }
  };
  step("ctrl-alt-del", disableCtrlAltDel);
  step("mounts", () => {
    const mounted = new Set(mountPoints(readFileSync("/proc/self/mounts", "utf8")));
    for (const m of BOX_MOUNTS) {
      if (mounted.has(m.target)) continue;
      step(`mount ${m.target}`, () => {
        mkdirSync(m.target, { recursive: true });
        mount(m.source, m.target, m.fstype, m.flags, m.data);
      });
    }
  });
  const params = parseCmdline(readFileSync("/proc/cmdline", "utf8"));
  for (const why of params.refused) log.warn("init: kernel command line parameter refused", { why });
  if (params.box) step("hostname", () => sethostname(params.box!));
  if (params.agents.length > 0) step("agent CLIs", () => mountAgents(params.agents, params.agentDev, log));
  step("lo up", () => interfaceUp("lo"));
  for (const dir of [GUEST_WORKSPACE, GUEST_HOME]) step(`mkdir ${dir}`, () => mkdirSync(dir, { recursive: true }));
  const env = boxEnv(inherited, params.boxId, existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh");
  // Bun.spawn looks commands up in PATH; the guest's own cwd should not pin a mount.
  process.env.PATH = env.PATH;
  process.env.HOME = env.HOME;
  process.chdir("/");
  log.info("init done", { box: params.box, id: params.boxId, ms: Math.round(performance.now() - t0) });
  return env;
}

/** Where process boxes see the agent CLIs too (host/src/engine/process/bwrap-args.ts). */
export const GUEST_AGENTS = "/.hutch/agents";

/**
 * The agent CLI disks, read-only, each at /.hutch/agents/<name> in a small
 * tmpfs (the guest disk at /.hutch is read-only): pmem devices mounted with
 * DAX, so a CLI's pages are mapped from the host's page cache like the
 * guest's own binary, or virtio-blk disks found by their serial. One that
 * fails is logged and skipped: a box without one CLI still serves the others.
 */
function mountAgents(names: string[], via: "pmem" | "blk", log: Logger): void {
  mount("agents", GUEST_AGENTS, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=64k");
  const bySerial = via === "blk" ? blockSerials() : new Map<string, string>();
  names.forEach((name, i) => {
    const dev = via === "pmem" ? `/dev/pmem${i + 1}` : bySerial.get(`agent${i}`);
    const target = `${GUEST_AGENTS}/${name}`;
    try {
      if (!dev || !existsSync(dev)) throw new Error(`no device for it (${dev ?? `serial agent${i}`})`);
      mkdirSync(target);
      mount(dev, target, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV, via === "pmem" ? "dax" : "");
    } catch (err) {
      log.error("init: agent CLI disk not mounted", { agent: name, error: (err as Error).message });
    }
  });
}

/** virtio-blk disks by serial: /sys/block/vdX/serial -> /dev/vdX. */
function blockSerials(): Map<string, string> {
  const out = new Map<string, string>();
  for (const dev of readdirSync("/sys/block")) {
    try {
      out.set(readFileSync(`/sys/block/${dev}/serial`, "utf8").trim(), `/dev/${dev}`);
    } catch {
      // no serial: not one of ours
    }
  }
  return out;
}

/**
 * The environment of a box's processes. The kernel hands PID 1 little (HOME=/,
 * TERM=linux and command-line words without a dot) and busybox sh adds its
 * own, so it is built here, as the process engine's bwrap does, keeping only
 * HUTCH_GUEST_* (settable from the kernel command line for debugging).
 * Processes run as the box's user (uid 1000) unless a request asks for root
 * (guest/src/tools/spawn.ts sets HOME, USER and LOGNAME for each).
 */
export function boxEnv(inherited: NodeJS.ProcessEnv, boxId: string | undefined, shell: string): Record<string, string> {
  const env: Record<string, string> = {
    HOME: GUEST_HOME,
    USER: "hutch",
    LOGNAME: "hutch",
    SHELL: shell,
    PATH: "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
    LANG: "C.UTF-8",
    TERM: "xterm-256color",
    // As PID 1 the host is on the other end of a virtio-serial port.
    HUTCH_GUEST_CHANNEL: "vport:hutch.agent",
  };
  if (boxId) env.HUTCH_BOX_ID = boxId;
  for (const [k, v] of Object.entries(inherited)) {
    if (k.startsWith("HUTCH_GUEST_") && v !== undefined) env[k] = v;
  }
  return env;
}

/**
 * PID 1 must not exit (the kernel panics): errors are logged and the guest
 * keeps serving; an exit that happens anyway (process.exit anywhere, or the
 * event loop running dry) becomes a power-off.
 */
export function guardPid1(log: Logger): void {
  process.on("uncaughtException", (err) => log.error("uncaught exception (PID 1 keeps running)", { error: describe(err) }));
  process.on("unhandledRejection", (reason) => log.error("unhandled rejection (PID 1 keeps running)", { error: describe(reason) }));
  process.on("exit", (code) => {
    log.error("PID 1 is exiting: powering off instead", { code });
    sync();
    powerOffNow();
  });
}

function describe(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}

/**
 * The end of a box: every process still alive (orphans included) gets SIGTERM
 * and then SIGKILL, filesystems are synced and unmounted (lazily if busy),
 * the root is remounted read-only, and the machine powers off.
 */
export async function powerOff(log: Logger, graceMs = 1000): Promise<never> {
  for (const sig of ["SIGTERM", "SIGKILL"] as const) {
    try {
      process.kill(-1, sig);
    } catch {
      // ESRCH: nothing left besides PID 1.
    }
    const until = Date.now() + graceMs;
    while (Date.now() < until && hasLiveChildren()) await Bun.sleep(20);
  }
  sync();
  for (const target of unmountOrder(mountPoints(readFileSync("/proc/self/mounts", "utf8")))) {
    try {
      umount(target);
    } catch (err) {
      try {
        if (err instanceof SysError && err.errno === EBUSY) umount(target, MNT_DETACH);
        else throw err;
      } catch (err2) {
        log.warn("unmount failed", { target, error: (err2 as Error).message });
      }
    }
  }
  try {
    remountReadOnly("/");
  } catch (err) {
    log.warn("remounting / read-only failed", { error: (err as Error).message });
  }
  sync();
  log.info("powering off");
  const err = powerOffNow();
  log.error("power-off refused", { error: err.message });
  // Not PID 1 after all (or no CAP_SYS_BOOT): nothing sensible is left to do.
  process.exit(1);
}

// Children that are still running (exited ones are reaped as we go: Bun's are
// gone once stopAll returned, so nothing here can steal a status it waits for).
function hasLiveChildren(): boolean {
  for (;;) {
    const pid = peekExited();
    if (pid === null) return false;
    if (pid === 0) return true;
    reapPid(pid);
  }
}
