// The seccomp filter, run: a small classic-BPF interpreter executes the very
// program bwrap loads against seccomp_data for each case. (The e2e tier checks
// the kernel agrees: tests/e2e/limits.test.ts.)
import { describe, expect, test } from "bun:test";
import {
  CLONE_NAMESPACE_FLAGS,
  DENIED,
  ENOSYS,
  EPERM,
  RET,
  SYSCALLS,
  seccompBytes,
  seccompProgram,
  type Insn,
  type SeccompArch,
} from "../src/engine/process/seccomp.ts";

const ARCH = { x86_64: 0xc000003e, aarch64: 0xc00000b7, i386: 0x40000003 };

/** Runs a classic BPF program over struct seccomp_data {nr, arch, ip, args[6]}. */
function run(prog: Insn[], data: { nr: number; arch: number; args?: number[] }): number {
  const mem = new DataView(new ArrayBuffer(64));
  mem.setInt32(0, data.nr, true);
  mem.setUint32(4, data.arch >>> 0, true);
  (data.args ?? []).forEach((a, i) => {
    mem.setUint32(16 + i * 8, a >>> 0, true);
  });
  let A = 0;
  for (let pc = 0; pc < prog.length; pc++) {
    const { code, jt, jf, k } = prog[pc]!;
    switch (code) {
      case 0x20:
        A = mem.getUint32(k, true);
        break;
      case 0x54:
        A = (A & k) >>> 0;
        break;
      case 0x15:
        pc += A === k >>> 0 ? jt : jf;
        break;
      case 0x35:
        pc += A >= k >>> 0 ? jt : jf;
        break;
      case 0x06:
        return k >>> 0;
      default:
        throw new Error(`unknown opcode ${code.toString(16)}`);
    }
  }
  throw new Error("fell off the end of the program");
}

const allow = RET.allow;
const eperm = RET.errno(EPERM);
const enosys = RET.errno(ENOSYS);

describe.each(["x86_64", "aarch64"] as SeccompArch[])("seccomp filter (%s)", (arch) => {
  const prog = seccompProgram(arch);
  const call = (name: string, args?: number[]) => run(prog, { nr: SYSCALLS[name]![arch]!, arch: ARCH[arch], args });
  const readNr = arch === "x86_64" ? 0 : 63;

  test.each(DENIED.filter((n) => SYSCALLS[n]![arch] !== null))("%s is refused with EPERM", (name) => {
    expect(call(name)).toBe(eperm);
  });

  test("ordinary calls pass: read, and every number the table does not name", () => {
    expect(run(prog, { nr: readNr, arch: ARCH[arch] })).toBe(allow);
    const named = new Set(Object.values(SYSCALLS).map((a) => a[arch]));
    for (let nr = 0; nr < 470; nr++) if (!named.has(nr)) expect(run(prog, { nr, arch: ARCH[arch] })).toBe(allow);
  });

  test("clone without namespace flags (fork, threads) passes; with any namespace flag it is refused", () => {
    expect(call("clone", [0x11 /* SIGCHLD */])).toBe(allow);
    expect(call("clone", [0x003d0f00 /* pthread_create's flags */])).toBe(allow);
    for (let bit = 0; bit < 32; bit++) {
      const flag = (1 << bit) >>> 0;
      if (flag & CLONE_NAMESPACE_FLAGS) expect(call("clone", [0x11 | flag])).toBe(eperm);
    }
  });

  test("clone3 is ENOSYS, so libc falls back to clone, whose flags are checked", () => {
    expect(call("clone3")).toBe(enosys);
  });

  test("a foreign ABI is refused whatever the call", () => {
    expect(run(prog, { nr: readNr, arch: ARCH.i386 })).toBe(eperm);
    expect(run(prog, { nr: readNr, arch: arch === "x86_64" ? ARCH.aarch64 : ARCH.x86_64 })).toBe(eperm);
  });

  test("the bytes are struct sock_filter[]: 8 bytes an instruction, little-endian", () => {
    const bytes = seccompBytes(arch);
    expect(bytes.length).toBe(prog.length * 8);
    const view = new DataView(bytes.buffer);
    expect(view.getUint16(0, true)).toBe(prog[0]!.code);
    expect(view.getUint32(bytes.length - 4, true)).toBe(prog.at(-1)!.k >>> 0);
  });
});

test("x32 syscalls on x86_64 (numbers with bit 30) are refused", () => {
  const prog = seccompProgram("x86_64");
  expect(run(prog, { nr: 0x40000000, arch: ARCH.x86_64 })).toBe(eperm);
  expect(run(prog, { nr: 0x40000000 + 272, arch: ARCH.x86_64 })).toBe(eperm);
});
