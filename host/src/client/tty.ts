// Whether an fd is a terminal, without touching process.stdin/stdout/stderr:
// the first of those Bun builds costs ~8 ms (node:stream), and `node:tty`
// ~2.5 ms, against nothing for libc's isatty through bun:ffi (measured with
// compiled one-liners; scripts/bench/README.md, cli.ts). Where libc cannot
// be loaded (no glibc, other systems) node:tty answers.
type IsAtty = (fd: number) => boolean;
let isatty: IsAtty | undefined;

function load(): IsAtty {
  if (process.platform === "linux") {
    try {
      const { dlopen, FFIType } = require("bun:ffi") as typeof import("bun:ffi");
      const libc = dlopen("libc.so.6", { isatty: { args: [FFIType.i32], returns: FFIType.i32 } });
      return (fd) => libc.symbols.isatty(fd) === 1;
    } catch {
      // no glibc: fall through
    }
  }
  const tty = require("node:tty") as typeof import("node:tty");
  return (fd) => tty.isatty(fd);
}

export function isTerminal(fd: number): boolean {
  isatty ??= load();
  return isatty(fd);
}
