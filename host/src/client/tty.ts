// Whether an fd is a terminal, without touching process.stdin/stdout/stderr:
// the first of those Bun builds costs ~8 ms (node:stream), and `node:tty`
// ~2.5 ms, against nothing for libc's isatty through bun:ffi (../libc.ts;
// measured with compiled one-liners: scripts/bench/README.md, cli.ts).
// Where libc cannot be loaded (no glibc, other systems) node:tty answers.
import { libc } from "../libc.ts";

type IsAtty = (fd: number) => boolean;
let isatty: IsAtty | undefined;

function load(): IsAtty {
  const c = libc();
  if (c) return (fd) => c.isatty(fd) === 1;
  const tty = require("node:tty") as typeof import("node:tty");
  return (fd) => tty.isatty(fd);
}

export function isTerminal(fd: number): boolean {
  isatty ??= load();
  return isatty(fd);
}
