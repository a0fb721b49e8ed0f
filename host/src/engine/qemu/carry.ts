// An asleep VM, as another home must start it to load its state. The one hard
// rule: QEMU loads a state only into a VM with the very same devices (machine,
// CPU, memory layout, every disk the guest has mapped or mounted, with the
// same bytes), so nothing here guesses. What the VM was started with is read
// back from its saved command line (qemu.argv.json) and proven by building
// that command line again, byte for byte, from what was read; the new home's
// command line is then built by the same function (args.ts) with only the
// paths changed. A command line this version cannot rebuild is refused before
// anything moves.
import { readFileSync, statSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { HutchError } from "@hutch/shared";
import type { BoxHandle } from "../types.ts";
import { qemuArgs, type Accel, type Arch, type Platform, type QemuSpec } from "./args.ts";
import { currentAccel } from "./accel.ts";
import { ROOT_DISK_FDS, VM_FILES } from "./index.ts";

/** Everything about a VM's devices a state depends on, and nothing about where its files are. */
export interface VmLayout {
  platform: Platform;
  arch: Arch;
  accel: Accel;
  cpus: number;
  memoryMiB: number;
  /** The kernel command line's extra part (`--kernel-args`). */
  cmdline: string;
  imageHasPmem: boolean;
  guestDiskBytes: number;
  agentDisks: { name: string; bytes: number }[];
}

/** The files outside the box's directory the VM has open: the image's kernel and initramfs, and its read-only disks. */
export interface VmFiles {
  kernel: string;
  initrd: string;
  guestDisk: string;
  agentDisks: string[];
}

/** Where a carried box keeps its own copies of the read-only disks its guest has mapped (guest.img, agent-N.img in the carried tree). */
export const CARRIED_FILES = {
  guestDisk: "carried-guest.img",
  agentDisk: (i: number) => `carried-agent-${i}.img`,
} as const;

function hostPlatform(): Platform {
  return process.platform === "darwin" ? "darwin" : process.platform === "win32" ? "windows" : "linux";
}

function notRebuildable(box: BoxHandle, why: string): HutchError {
  return new HutchError(
    "invalid",
    `box "${box.name}" cannot be carried: its VM's saved command line ${why}`,
    `wake it and put it to sleep again with this version: hutch box wake ${box.name} && hutch box sleep ${box.name}`,
  );
}

function after(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** A read-only disk's path and size in the saved command line, as a pmem backend or a raw drive. */
function readOnlyDisk(argv: string[], id: string): { path: string; bytes: number | null } | null {
  const pmem = new RegExp(`^memory-backend-file,id=${id},mem-path=(.+),size=(\\d+),share=off,readonly=on$`);
  const blk = new RegExp(`^if=none,id=${id},file=(.+),format=raw,readonly=on$`);
  for (const a of argv) {
    const p = pmem.exec(a);
    if (p) return { path: p[1]!, bytes: Number(p[2]) };
    const b = blk.exec(a);
    if (b) return { path: b[1]!, bytes: null };
  }
  return null;
}

/** The paths a VM's command line names inside its box's directory. */
function boxPaths(dir: string): Pick<QemuSpec, "rootDisk" | "agent" | "qmp" | "consoleLog" | "pidfile"> {
  return {
    rootDisk: join(dir, VM_FILES.disk),
    agent: join(dir, VM_FILES.socket),
    qmp: join(dir, VM_FILES.qmp),
    consoleLog: join(dir, VM_FILES.console),
    pidfile: join(dir, VM_FILES.qemuPid),
  };
}

/** The command line a VM of this layout runs with, its files at these paths. */
export function vmArgv(
  box: { id: string; name: string; dir: string },
  layout: VmLayout,
  files: VmFiles,
  runAs: { uid: number; gid: number } | null,
): string[] {
  return qemuArgs({
    platform: layout.platform,
    arch: layout.arch,
    accel: layout.accel,
    boxId: box.id,
    name: box.name,
    cpus: layout.cpus,
    memoryMiB: layout.memoryMiB,
    kernel: files.kernel,
    initrd: files.initrd,
    cmdline: layout.cmdline,
    ...boxPaths(box.dir),
    guestDisk: files.guestDisk,
    guestDiskBytes: layout.guestDiskBytes,
    imageHasPmem: layout.imageHasPmem,
    ...(runAs ? { runAs, rootDiskFds: ROOT_DISK_FDS } : {}),
    agentDisks: layout.agentDisks.map((d, i) => ({ name: d.name, path: files.agentDisks[i]!, bytes: d.bytes })),
  });
}

/**
 * The layout and outside files of the VM an asleep box's saved command line
 * starts, proven by rebuilding that command line from them. Throws naming
 * what differs when it cannot be rebuilt (a command line from another
 * version, a config changed by hand).
 */
export function readVmLayout(box: BoxHandle): { layout: VmLayout; files: VmFiles; argv: string[] } {
  let argv: unknown;
  try {
    argv = JSON.parse(readFileSync(join(box.dir, VM_FILES.argv), "utf8"));
  } catch {
    throw notRebuildable(box, `(${VM_FILES.argv}) is missing or not JSON`);
  }
  if (!Array.isArray(argv) || !argv.every((a) => typeof a === "string")) throw notRebuildable(box, "is not a list of strings");
  const arch = /^qemu-system-(x86_64|aarch64)$/.exec(argv[0] ?? "")?.[1] as Arch | undefined;
  const accel = after(argv, "-accel") as Accel | undefined;
  const append = after(argv, "-append") ?? "";
  const kernel = after(argv, "-kernel");
  const initrd = after(argv, "-initrd");
  const guest = readOnlyDisk(argv, "guest");
  if (!arch || !accel || !["kvm", "hvf", "whpx", "tcg"].includes(accel) || !kernel || !initrd || !guest)
    throw notRebuildable(box, "lacks its machine, kernel or guest disk");
  const agentNames = /(?:^| )hutch\.agents=(\S+)/.exec(append)?.[1]?.split(",") ?? [];
  const agentFiles = agentNames.map((_, i) => readOnlyDisk(argv as string[], `agent${i}`));
  if (agentFiles.some((a) => a === null)) throw notRebuildable(box, "names an agent disk it does not attach");
  const cfg = box.config as { cpus?: number; memoryMiB?: number; kernelArgs?: string };
  const size = (d: { path: string; bytes: number | null }) => d.bytes ?? statSync(d.path).size;
  const layout: VmLayout = {
    platform: hostPlatform(),
    arch,
    accel,
    cpus: Number(after(argv, "-smp")),
    memoryMiB: Number.parseInt(after(argv, "-m") ?? "", 10),
    cmdline: cfg.kernelArgs ?? "",
    imageHasPmem: /(?:^| )hutch\.guest=pmem0(?: |$)/.test(append),
    guestDiskBytes: size(guest),
    agentDisks: agentNames.map((name, i) => ({ name, bytes: size(agentFiles[i]!) })),
  };
  const files: VmFiles = { kernel, initrd, guestDisk: guest.path, agentDisks: agentFiles.map((a) => a!.path) };
  const runAsArg = after(argv, "-runas");
  const runAs = runAsArg ? runAsArg.split(":").map(Number) : null;
  const again = vmArgv(box, layout, files, runAs ? { uid: runAs[0]!, gid: runAs[1]! } : null);
  const first = again.findIndex((a, i) => a !== argv[i]);
  if (first >= 0 || again.length !== argv.length)
    throw notRebuildable(
      box,
      `differs from what this version builds for it at argument ${first >= 0 ? first : Math.min(again.length, argv.length)} (${JSON.stringify(argv[first] ?? null)})`,
    );
  return { layout, files, argv };
}

/** The first line of `qemu-system-<arch> --version` ("QEMU emulator version 7.2.22 (...)"), or null when there is none. */
export function qemuVersion(arch: Arch): string | null {
  const r = spawnSync(`qemu-system-${arch}`, ["--version"], { encoding: "utf8" });
  return r.status === 0 ? (r.stdout.split("\n")[0]?.trim() ?? null) : null;
}

/**
 * Why this host cannot load a state QEMU `version` saved under `accel` on
 * `arch`, or null. The same version: `-machine q35` names that version's
 * newest machine type, so another version's QEMU may lay the machine out
 * differently. The same accelerator: tcg runs anywhere; kvm (or hvf, whpx)
 * only where this home proved it.
 */
export function hostProblem(home: string, saved: { version: string; arch: Arch; accel: Accel }): string | null {
  const arch: Arch = process.arch === "arm64" ? "aarch64" : "x86_64";
  if (saved.arch !== arch) return `the box ran on ${saved.arch}; this server is ${arch}`;
  const have = qemuVersion(arch);
  if (!have) return `qemu-system-${arch} is not installed here`;
  if (have !== saved.version) return `the box's state was saved by "${saved.version}"; this server has "${have}"`;
  if (saved.accel !== "tcg") {
    const here = currentAccel(home)?.accel;
    if (here !== saved.accel)
      return `the box ran under ${saved.accel}; this server ${here ? `runs VMs under ${here}` : "has not proven an accelerator yet (hutch doctor)"}`;
  }
  return null;
}
