// An operation's answer (shared/src/ops.ts): NDJSON progress lines in the
// order the work reports them, then one last line, its result or its error,
// after which the body ends. The work runs in the daemon whoever asked; if the
// client goes away, or the daemon shuts down, its signal aborts, and the work
// decides how to stop (an image build kills its commands and removes its
// staging; doctor deletes its throwaway boxes).
import { HutchError, type OpReport } from "@hutch/shared";
import { log } from "../log.ts";

const logger = log.create({ service: "ops" });

export type OpWork<R> = (report: OpReport, signal: AbortSignal) => Promise<R>;

/** The operations running now, so shutdown can abort them (their answers would hold the daemon's stop). */
export class RunningOps {
  private readonly running = new Set<AbortController>();

  track(abort: AbortController): () => void {
    this.running.add(abort);
    return () => this.running.delete(abort);
  }

  close(): void {
    for (const a of [...this.running])
      a.abort(new HutchError("unavailable", "the daemon is shutting down", "run it again once the daemon is back"));
    this.running.clear();
  }
}

function named(err: unknown): HutchError {
  return err instanceof HutchError ? err : new HutchError("failed", err instanceof Error ? err.message : String(err), "see the daemon log");
}

export function opResponse<R>(what: string, request: Request, running: RunningOps, work: OpWork<R>): Response {
  const enc = new TextEncoder();
  const abort = new AbortController();
  const untrack = running.track(abort);
  const gone = () => abort.abort(new HutchError("unavailable", "the client went away"));
  request.signal.addEventListener("abort", gone);
  let open = true;
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      const write = (line: unknown) => {
        if (!open) return;
        try {
          ctl.enqueue(enc.encode(`${JSON.stringify(line)}\n`));
        } catch {
          open = false;
        }
      };
      const t0 = performance.now();
      logger.info("operation started", { op: what });
      void work(write, abort.signal)
        .then(
          (value) => {
            logger.info("operation done", { op: what, ms: Math.round(performance.now() - t0) });
            write({ type: "result", value });
          },
          (err) => {
            const e = named(err);
            logger.warn("operation failed", { op: what, error: e.message, ms: Math.round(performance.now() - t0) });
            write({ type: "error", error: e.toBody().error });
          },
        )
        .finally(() => {
          untrack();
          request.signal.removeEventListener("abort", gone);
          if (!open) return;
          open = false;
          try {
            ctl.close();
          } catch {
            // cancelled by the client
          }
        });
    },
    cancel() {
      open = false;
      gone();
    },
  });
  return new Response(body, { headers: { "content-type": "application/x-ndjson", "cache-control": "no-store" } });
}
