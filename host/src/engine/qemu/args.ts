// The QEMU command line, built as data by a pure function and golden-tested
// for every OS/arch/accelerator (test/qemu-args.test.ts). Platform
// differences live in the profile table below, not in scattered ifs.

export type Platform = "linux" | "darwin" | "windows";
export type Arch = "x86_64" | "aarch64";
export type Accel = "kvm" | "hvf" | "whpx" | "tcg";

export interface QemuSpec {
  platform: Platform;
  arch: Arch;
  accel: Accel;
  /** The QEMU binary; defaults to qemu-system-<arch> on PATH. */
  qemu?: string;
  boxId: string;
  name: string;
  cpus: number;
  memoryMiB: number;
  kernel: string;
  initrd: string;
  /** Extra kernel command line, appended after the fixed part. */
  cmdline: string;
  rootDisk: string;
  guestDisk: string;
  /** The guest disk's size: a virtio-pmem device maps exactly this much. */
  guestDiskBytes: number;
  /** The image's initramfs carries virtio_pmem (images built before it only know vdb). */
  imageHasPmem: boolean;
  /** Unix socket path (a named pipe name on Windows) for the agent channel. */
  agent: string;
  qmp: string;
  consoleLog: string;
  pidfile: string;
  /** Linux, daemon is root: QEMU drops to the box's own host uid once its files are open. */
  runAs?: { uid: number; gid: number };
  /**
   * The root disk handed over open, as these fds of QEMU's (read-write, then
   * read-only), instead of by path: a QEMU that dropped to the box's uid
   * cannot open the path again, and saving a VM's state reopens its disk
   * read-only (and a restore read-write).
   */
  rootDiskFds?: [rw: number, ro: number];
  /** The agent CLI disks (read-only ext4, host/src/engine/agent-disks.ts), attached like the guest disk. */
  agentDisks?: { name: string; path: string; bytes: number }[];
}

interface Profile {
  machine: string;
  cpu: string;
  /** How virtio devices attach: PCI, or MMIO on microvm / virt. */
  bus: "pci" | "device";
  console: string;
  sandbox: boolean;
  /**
   * A vmgenid device (ACPI, so q35 only: microvm and virt boot with no
   * firmware to load its table; not on Windows, whose QEMU is not tried
   * here): its id changes each time a saved state is loaded, and the guest
   * kernel reseeds its random numbers on that. Where it is there, boxes may
   * start from a shared booted state (booted.ts).
   */
  vmgenid?: boolean;
  /**
   * How the guest disk (hutch-guest's binary) is attached. "pmem": a
   * virtio-pmem device over the host's file, mounted with DAX, so the guest
   * maps the binary's pages straight from it: no block I/O and no second copy
   * in the guest's page cache. Under tcg every page read through virtio-blk
   * costs ~70 µs of emulated kernel work, half a second of each boot. "blk":
   * a read-only virtio-blk disk, where the machine has no memory devices for
   * pmem (microvm) or it is not proven on that host yet, and for images whose
   * initramfs has no virtio_pmem (built before it).
   */
  guestDisk: "pmem" | "blk";
  /** How a local socket chardev is spelled on this OS. */
  socket: (id: string, path: string) => string;
}

const unixSocket = (id: string, path: string) => `socket,id=${id},path=${path},server=on,wait=off`;
const namedPipe = (id: string, name: string) => `pipe,id=${id},path=${name}`;

/**
 * One row per supported host. kvm uses microvm (no firmware, no PCI: the
 * fastest boot); tcg uses q35, which is no slower under emulation and needs
 * nothing beyond virtio-pci in the initramfs; Apple silicon uses virt.
 */
function profile(p: Platform, a: Arch, accel: Accel): Profile {
  if (a === "x86_64" && accel === "kvm") {
    return {
      machine: "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=on,rtc=on",
      cpu: "host",
      bus: "device",
      console: "ttyS0",
      sandbox: true,
      guestDisk: "blk",
      socket: unixSocket,
    };
  }
  if (a === "x86_64" && p === "windows") {
    return { machine: "q35", cpu: "max", bus: "pci", console: "ttyS0", sandbox: false, guestDisk: "blk", socket: namedPipe };
  }
  if (a === "x86_64") {
    // Bun needs AVX2: under tcg only -cpu max (or Haswell+) boots it.
    return {
      machine: "q35",
      cpu: accel === "tcg" ? "max" : "host",
      bus: "pci",
      console: "ttyS0",
      sandbox: p === "linux",
      guestDisk: p === "linux" ? "pmem" : "blk",
      socket: unixSocket,
      vmgenid: true,
    };
  }
  return {
    machine: "virt,highmem=on",
    cpu: accel === "tcg" ? "max" : "host",
    bus: "device",
    console: "ttyAMA0",
    sandbox: p === "linux",
    guestDisk: "blk",
    socket: unixSocket,
  };
}

const dev = (bus: "pci" | "device", kind: string) => `virtio-${kind}-${bus}`;
const MiB = 1024 * 1024;

/**
 * The read-only disks' QEMU arguments (the guest disk first, then each agent
 * CLI's), and the -m suffix pmem devices need (room above RAM for them). All
 * go the same way: pmem where the profile and the image allow, else virtio-blk
 * (the agent disks with serials agent0, agent1, ... the guest finds them by).
 */
function readOnlyDiskArgs(pr: Profile, s: QemuSpec): { via: "pmem" | "blk"; args: string[]; memory: string } {
  const disks = [
    { id: "guest", path: s.guestDisk, bytes: s.guestDiskBytes, serial: "" },
    ...(s.agentDisks ?? []).map((a, i) => ({ id: `agent${i}`, path: a.path, bytes: a.bytes, serial: `agent${i}` })),
  ];
  if (pr.guestDisk === "blk" || !s.imageHasPmem) {
    const args = disks.flatMap((d) => [
      "-drive",
      `if=none,id=${d.id},file=${d.path},format=raw,readonly=on`,
      "-device",
      `${dev(pr.bus, "blk")},drive=${d.id}${d.serial ? `,serial=${d.serial}` : ""}`,
    ]);
    return { via: "blk", args, memory: "" };
  }
  // share=off with readonly=on: a private read-only mapping of the file, so
  // every box on the host shares the one copy in the host's page cache.
  const maxMiB = s.memoryMiB + disks.reduce((n, d) => n + Math.ceil(d.bytes / MiB), 0);
  return {
    via: "pmem",
    args: disks.flatMap((d) => [
      "-object",
      `memory-backend-file,id=${d.id},mem-path=${d.path},size=${d.bytes},share=off,readonly=on`,
      "-device",
      `virtio-pmem-pci,memdev=${d.id},id=${d.id}disk`,
    ]),
    memory: `,slots=${disks.length},maxmem=${maxMiB}M`,
  };
}

export function qemuArgs(s: QemuSpec): string[] {
  const pr = profile(s.platform, s.arch, s.accel);
  const guest = readOnlyDiskArgs(pr, s);
  const agents = s.agentDisks?.length ? ` hutch.agents=${s.agentDisks.map((a) => a.name).join(",")} hutch.agentdev=${guest.via}` : "";
  const args = [
    s.qemu ?? `qemu-system-${s.arch}${s.platform === "windows" ? ".exe" : ""}`,
    "-name",
    `hutch-${s.name},process=hutch-${s.boxId}`,
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-machine",
    pr.machine,
    "-accel",
    s.accel,
    "-cpu",
    pr.cpu,
    "-smp",
    String(s.cpus),
    "-m",
    `${s.memoryMiB}M${guest.memory}`,
    "-kernel",
    s.kernel,
    "-initrd",
    s.initrd,
    "-append",
    `console=${pr.console} panic=-1 quiet rdinit=/init hutch.guest=${guest.via === "pmem" ? "pmem0" : "vdb"} hutch.box=${s.name} hutch.id=${s.boxId}${agents}${s.cmdline ? ` ${s.cmdline}` : ""}`,
    ...(s.rootDiskFds ? ["-add-fd", `fd=${s.rootDiskFds[0]},set=1,opaque=rw`, "-add-fd", `fd=${s.rootDiskFds[1]},set=1,opaque=ro`] : []),
    "-drive",
    `if=none,id=root,file=${s.rootDiskFds ? "/dev/fdset/1" : s.rootDisk},format=qcow2,cache=writeback,discard=unmap`,
    "-device",
    `${dev(pr.bus, "blk")},drive=root`,
    ...guest.args,
    "-device",
    `${dev(pr.bus, "serial")},id=vser`,
    "-chardev",
    pr.socket("agent", s.agent),
    "-device",
    "virtserialport,bus=vser.0,chardev=agent,name=hutch.agent",
    ...(pr.vmgenid ? ["-device", "vmgenid,id=vmgenid"] : []),
    "-object",
    "rng-random,id=rng,filename=/dev/urandom",
    "-device",
    `${dev(pr.bus, "rng")},rng=rng`,
    "-chardev",
    // append=on (O_APPEND): the daemon empties the log when it outgrows its budget, and QEMU's next write lands at its start.
    `file,id=console,path=${s.consoleLog},append=on`,
    "-serial",
    "chardev:console",
    "-qmp",
    pr.socket === namedPipe ? `pipe:${s.qmp}` : `unix:${s.qmp},server=on,wait=off`,
    "-no-reboot",
  ];
  if (s.platform === "windows") args.splice(args.indexOf("rng-random,id=rng,filename=/dev/urandom"), 1, "rng-builtin,id=rng");
  // spawn=deny forbids fork, so QEMU is not told to -daemonize: the engine
  // starts it detached itself and knows it by its pidfile.
  // -runas changes uid after the filter is in place, so set*id must stay allowed then; an
  // unprivileged QEMU cannot elevate with them, which is what the deny guarded against.
  if (pr.sandbox) args.push("-sandbox", `on,obsolete=deny,elevateprivileges=${s.runAs ? "allow" : "deny"},spawn=deny,resourcecontrol=deny`);
  if (s.runAs && s.platform !== "windows") args.push("-runas", `${s.runAs.uid}:${s.runAs.gid}`);
  args.push("-pidfile", s.pidfile);
  return args;
}

/** The accelerator each platform tries first; tcg is the last resort everywhere. */
export function preferredAccel(p: Platform): Accel {
  return p === "linux" ? "kvm" : p === "darwin" ? "hvf" : "whpx";
}
