// HTTP for doctor: an operation (daemon/ops.ts) streaming each check as it is
// known, the report last. No logic here. Its throwaway boxes (one per engine)
// are paid for from the caller's creation limit before it starts.
import { Elysia } from "elysia";
import { runDoctor, type DoctorDeps } from "../../doctor/index.ts";
import { opResponse, type RunningOps } from "../ops.ts";
import { principalOf } from "../actor.ts";

/** Takes n box creations from the caller's limit (all or none, else throws) and runs fn with them paid for. */
export type Prepay = <T>(n: number, fn: () => T) => T;

export function doctorController(deps: DoctorDeps, running: RunningOps, prepay: Prepay = (_n, fn) => fn()) {
  return new Elysia({ prefix: "/v1", tags: ["doctor"], normalize: false }).post(
    "/doctor",
    ({ request }) =>
      prepay(Object.keys(deps.engines).length, () =>
        opResponse("doctor", request, running, (report, signal) =>
          runDoctor({ ...deps, where: principalOf(request)?.remote ? null : deps.where }, report, signal),
        ),
      ),
    {
      detail: {
        summary: "Find out what this host can run, by starting a throwaway box per engine (NDJSON: progress and checks, then the report)",
      },
    },
  );
}
