// argv that runs this same program in another role (`hutch daemon`, the image
// build's worker): the compiled binary itself, or bun with this tree's entry
// when running from source (also under `bun test`, whose Bun.main is a test).
import { join } from "node:path";

export function selfArgv(...args: string[]): string[] {
  const compiled = Bun.main.startsWith("/$bunfs/") || Bun.main.startsWith("B:/~BUN/");
  return compiled ? [process.execPath, ...args] : [process.execPath, join(import.meta.dir, "main.ts"), ...args];
}
