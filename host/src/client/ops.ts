// Running a daemon operation (shared/src/ops.ts) from a client: POST, then
// read the NDJSON answer, every line checked against the op's schema before
// use. Progress goes to the caller as it arrives; the result is returned, an
// error line thrown as the named error it carries. A body that ends without
// either means the daemon went away mid-operation.
import { check, firstError, HutchError, ndjson, OpLine, type OpProgress, type Static, type TSchema } from "@hutch/shared";
import type { DaemonClient } from "./daemon.ts";

export interface OpHandlers {
  /** Each progress line, parsed and checked, in order. */
  progress?(p: OpProgress): void;
  /** Each line as it arrived, result included (not an error: that is thrown), for --json. */
  line?(line: unknown): void;
}

export async function runOp<S extends TSchema>(
  daemon: DaemonClient,
  path: string,
  body: unknown,
  result: S,
  h: OpHandlers = {},
): Promise<Static<S>> {
  return opAnswer(
    path,
    result,
    h,
    daemon.transport.fetch(path, {
      method: "POST",
      headers: { ...daemon.headers, "content-type": "application/json" },
      body: JSON.stringify(body ?? {}),
    }),
  );
}

/** An operation that only reads (an image verify): a GET, so a read-only token may run it. */
export function readOp<S extends TSchema>(daemon: DaemonClient, path: string, result: S, h: OpHandlers = {}): Promise<Static<S>> {
  return opAnswer(path, result, h, daemon.transport.fetch(path, { headers: daemon.headers }));
}

async function opAnswer<S extends TSchema>(path: string, result: S, h: OpHandlers, answer: Promise<Response>): Promise<Static<S>> {
  const schema = OpLine(result);
  let res: Response;
  try {
    res = await answer;
  } catch (err) {
    throw new HutchError("unavailable", `lost the daemon: ${(err as Error).message}`, "retry; if it persists see the daemon log");
  }
  if (!res.ok || !res.body) throw HutchError.fromBody(await res.json().catch(() => undefined), res.status);
  const what = path.replace(/^\/v1\//, "");
  try {
    for await (const raw of ndjson(res.body)) {
      if (!check(schema, raw))
        throw new HutchError(
          "failed",
          `the daemon sent a malformed ${what} line: ${firstError(schema, raw)}`,
          "the daemon and this CLI may be different builds: restart the daemon",
        );
      const line = raw as OpLine<Static<S>>;
      if (line.type === "error") throw new HutchError(line.error.code, line.error.message, line.error.hint, line.error.data);
      h.line?.(line);
      if (line.type === "result") return line.value;
      h.progress?.(line);
    }
  } catch (err) {
    if (err instanceof HutchError) throw err;
    // The body was cut (the daemon died); fall through to the error below.
  }
  throw new HutchError("unavailable", `the daemon went away during ${what}`, "see the daemon log; then run it again");
}
