// The degenerate agent: a shell. Headless runs the prompt as a bash command
// line; each line it prints is a delta of one message, its exit ends the turn.
import { Emitter } from "./emit.ts";
import type { Harness, Mapper } from "./types.ts";

export function shellMapper(): Mapper {
  const e = new Emitter();
  const lines: string[] = [];
  return {
    line(text) {
      lines.push(text);
      return [...e.working(), ...e.delta("shell-output", `${text}\n`)];
    },
    end(exit) {
      const out = lines.length ? e.message("shell-output", lines.join("\n")) : [];
      return [...out, ...e.usage(null, null, null), ...e.exited(exit)];
    },
  };
}

export const shell: Harness = {
  name: "shell",
  npm: null,
  bindings: [],
  egress: [],
  env: () => ({}),
  files: () => ({}),
  headless: (prompt) => ["-lc", prompt],
  interactive: () => ["-l"],
  mapper: shellMapper,
  stop: { signal: "TERM", graceMs: 3000 },
};
