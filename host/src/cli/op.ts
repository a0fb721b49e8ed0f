// An operation from the CLI (shared/src/ops.ts): its progress redrawn on a
// terminal, or with --json its NDJSON lines on stdout, the result last.
import type { Static, TSchema } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { runOp } from "../client/ops.ts";
import { progressDisplay } from "../client/progress.ts";
import type { GlobalArgs } from "./args.ts";

export async function op<S extends TSchema>(a: GlobalArgs, path: string, req: unknown, result: S): Promise<Static<S>> {
  const d = await connectDaemon(a.home);
  const display = a.json ? null : progressDisplay();
  try {
    return await runOp(d, path, req, result, {
      line: (l) => a.json && process.stdout.write(`${JSON.stringify(l)}\n`),
      progress: (p) => (a.json ? p.type === "note" && process.stderr.write(`hutch: ${p.text}\n`) : display!.show(p)),
    });
  } finally {
    display?.stop();
  }
}
