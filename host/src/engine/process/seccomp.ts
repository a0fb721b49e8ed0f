// The seccomp filter every process-engine box runs under, built as a classic
// BPF program (the bytes bwrap's --seccomp reads) by a pure function, so it
// can be table-tested by running it. A coding agent needs compilers, package
// managers, browsers and debuggers; it has no use for the syscalls below,
// which are where sandbox escapes and host-wide side effects live. Refused
// calls fail with EPERM, never kill: a tool that probes for a feature sees
// "not permitted" and carries on. clone3 is ENOSYS, not EPERM, because its
// flags live in memory a filter cannot read: glibc then falls back to clone,
// whose flags the filter checks. Foreign ABIs (i386 and x32 on x86_64) are
// refused outright, or they would be a second, unfiltered syscall table.

export type SeccompArch = "x86_64" | "aarch64";

const AUDIT_ARCH: Record<SeccompArch, number> = { x86_64: 0xc000003e, aarch64: 0xc00000b7 };
/** x32 syscalls on x86_64 carry this bit in their number. */
const X32_BIT = 0x40000000;

/** Every namespace flag clone(2) takes (CLONE_NEWTIME is clone3/unshare only). */
export const CLONE_NAMESPACE_FLAGS =
  0x00020000 /* NEWNS */ |
  0x02000000 /* NEWCGROUP */ |
  0x04000000 /* NEWUTS */ |
  0x08000000 /* NEWIPC */ |
  0x10000000 /* NEWUSER */ |
  0x20000000 /* NEWPID */ |
  0x40000000 /* NEWNET */;

/** Syscall numbers per arch (asm/unistd_64.h; asm-generic/unistd.h for aarch64). */
export const SYSCALLS: Record<string, Record<SeccompArch, number | null>> = {
  clone: { x86_64: 56, aarch64: 220 },
  clone3: { x86_64: 435, aarch64: 435 },
  // namespaces: nested user namespaces are the kernel's widest attack surface
  unshare: { x86_64: 272, aarch64: 97 },
  setns: { x86_64: 308, aarch64: 268 },
  // kernel keyrings are shared host-wide state
  keyctl: { x86_64: 250, aarch64: 219 },
  add_key: { x86_64: 248, aarch64: 217 },
  request_key: { x86_64: 249, aarch64: 218 },
  // in-kernel programs, profiling and page-fault handling from user space
  bpf: { x86_64: 321, aarch64: 280 },
  perf_event_open: { x86_64: 298, aarch64: 241 },
  userfaultfd: { x86_64: 323, aarch64: 282 },
  io_uring_setup: { x86_64: 425, aarch64: 425 },
  io_uring_enter: { x86_64: 426, aarch64: 426 },
  io_uring_register: { x86_64: 427, aarch64: 427 },
  // modules and kexec
  init_module: { x86_64: 175, aarch64: 105 },
  finit_module: { x86_64: 313, aarch64: 273 },
  delete_module: { x86_64: 176, aarch64: 106 },
  kexec_load: { x86_64: 246, aarch64: 104 },
  kexec_file_load: { x86_64: 320, aarch64: 294 },
  // mounts (the sandbox's are made before the filter applies)
  mount: { x86_64: 165, aarch64: 40 },
  umount2: { x86_64: 166, aarch64: 39 },
  pivot_root: { x86_64: 155, aarch64: 41 },
  open_tree: { x86_64: 428, aarch64: 428 },
  move_mount: { x86_64: 429, aarch64: 429 },
  fsopen: { x86_64: 430, aarch64: 430 },
  fsconfig: { x86_64: 431, aarch64: 431 },
  fsmount: { x86_64: 432, aarch64: 432 },
  fspick: { x86_64: 433, aarch64: 433 },
  mount_setattr: { x86_64: 442, aarch64: 442 },
  // the host's clock, swap, accounting, quotas, power and kernel log
  settimeofday: { x86_64: 164, aarch64: 170 },
  clock_settime: { x86_64: 227, aarch64: 112 },
  clock_adjtime: { x86_64: 305, aarch64: 266 },
  swapon: { x86_64: 167, aarch64: 224 },
  swapoff: { x86_64: 168, aarch64: 225 },
  acct: { x86_64: 163, aarch64: 89 },
  quotactl: { x86_64: 179, aarch64: 60 },
  quotactl_fd: { x86_64: 443, aarch64: 443 },
  reboot: { x86_64: 169, aarch64: 142 },
  syslog: { x86_64: 103, aarch64: 116 },
  vhangup: { x86_64: 153, aarch64: 58 },
  // file handles bypass path permissions (the classic container escape)
  open_by_handle_at: { x86_64: 304, aarch64: 265 },
  // obsolete or x86-only
  lookup_dcookie: { x86_64: 212, aarch64: 18 },
  nfsservctl: { x86_64: 180, aarch64: 42 },
  uselib: { x86_64: 134, aarch64: null },
  _sysctl: { x86_64: 156, aarch64: null },
  iopl: { x86_64: 172, aarch64: null },
  ioperm: { x86_64: 173, aarch64: null },
  create_module: { x86_64: 174, aarch64: null },
  get_kernel_syms: { x86_64: 177, aarch64: null },
  query_module: { x86_64: 178, aarch64: null },
};

/** Refused with EPERM whatever their arguments (clone is refused only with namespace flags; clone3 is ENOSYS). */
export const DENIED = Object.keys(SYSCALLS).filter((n) => n !== "clone" && n !== "clone3");

export const EPERM = 1;
export const ENOSYS = 38;

export const RET = {
  allow: 0x7fff0000,
  errno: (e: number) => 0x00050000 | (e & 0xffff),
} as const;

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const AND_K = 0x54;
const RET_K = 0x06;

/** struct seccomp_data offsets: nr, arch, then the args (low word first on little-endian). */
const OFF_NR = 0;
const OFF_ARCH = 4;
const OFF_ARG0_LO = 16;

export interface Insn {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

type Op = { insn: Insn; jt?: string; jf?: string } | { label: string };

/** The filter for one arch, as instructions. */
export function seccompProgram(arch: SeccompArch): Insn[] {
  const nr = (name: string) => SYSCALLS[name]![arch];
  const ops: Op[] = [
    { insn: { code: LD_W_ABS, jt: 0, jf: 0, k: OFF_ARCH } },
    { insn: { code: JEQ_K, jt: 0, jf: 0, k: AUDIT_ARCH[arch] >>> 0 }, jt: "native", jf: "deny" },
    { label: "native" },
    { insn: { code: LD_W_ABS, jt: 0, jf: 0, k: OFF_NR } },
  ];
  if (arch === "x86_64") ops.push({ insn: { code: JGE_K, jt: 0, jf: 0, k: X32_BIT }, jt: "deny", jf: "next0" }, { label: "next0" });
  ops.push({ insn: { code: JEQ_K, jt: 0, jf: 0, k: nr("clone")! }, jt: "clone", jf: "next1" }, { label: "next1" });
  ops.push({ insn: { code: JEQ_K, jt: 0, jf: 0, k: nr("clone3")! }, jt: "nosys", jf: "next2" }, { label: "next2" });
  DENIED.forEach((name, i) => {
    const n = nr(name);
    if (n === null || n === undefined) return;
    ops.push({ insn: { code: JEQ_K, jt: 0, jf: 0, k: n }, jt: "deny", jf: `d${i}` }, { label: `d${i}` });
  });
  ops.push(
    { insn: { code: RET_K, jt: 0, jf: 0, k: RET.allow } },
    { label: "deny" },
    { insn: { code: RET_K, jt: 0, jf: 0, k: RET.errno(EPERM) } },
    { label: "nosys" },
    { insn: { code: RET_K, jt: 0, jf: 0, k: RET.errno(ENOSYS) } },
    { label: "clone" },
    { insn: { code: LD_W_ABS, jt: 0, jf: 0, k: OFF_ARG0_LO } },
    { insn: { code: AND_K, jt: 0, jf: 0, k: CLONE_NAMESPACE_FLAGS } },
    { insn: { code: JEQ_K, jt: 0, jf: 0, k: 0 }, jt: "cloneok", jf: "clonedeny" },
    { label: "cloneok" },
    { insn: { code: RET_K, jt: 0, jf: 0, k: RET.allow } },
    { label: "clonedeny" },
    { insn: { code: RET_K, jt: 0, jf: 0, k: RET.errno(EPERM) } },
  );
  return assemble(ops);
}

/** Resolves labels into BPF's forward-only relative jumps (at most 255 instructions ahead). */
function assemble(ops: Op[]): Insn[] {
  const at = new Map<string, number>();
  let pc = 0;
  for (const op of ops) {
    if ("label" in op) at.set(op.label, pc);
    else pc++;
  }
  const out: Insn[] = [];
  for (const op of ops) {
    if ("label" in op) continue;
    const here = out.length;
    const rel = (label: string | undefined) => {
      if (label === undefined) return 0;
      const d = at.get(label)! - here - 1;
      if (d < 0 || d > 255) throw new Error(`seccomp: jump to ${label} out of range (${d})`);
      return d;
    };
    out.push({ ...op.insn, jt: rel(op.jt), jf: rel(op.jf) });
  }
  return out;
}

/** The program as struct sock_filter[] bytes (little-endian), as bwrap --seccomp reads it. */
export function seccompBytes(arch: SeccompArch): Uint8Array {
  const prog = seccompProgram(arch);
  const buf = new Uint8Array(prog.length * 8);
  const view = new DataView(buf.buffer);
  prog.forEach((insn, i) => {
    view.setUint16(i * 8, insn.code, true);
    view.setUint8(i * 8 + 2, insn.jt);
    view.setUint8(i * 8 + 3, insn.jf);
    view.setUint32(i * 8 + 4, insn.k >>> 0, true);
  });
  return buf;
}

/** The arch seccomp filters are built for on this host, or null where there is none (bwrap runs only on Linux). */
export function hostSeccompArch(): SeccompArch | null {
  if (process.platform !== "linux") return null;
  return process.arch === "x64" ? "x86_64" : process.arch === "arm64" ? "aarch64" : null;
}
