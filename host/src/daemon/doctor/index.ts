// HTTP for doctor: an operation (daemon/ops.ts) streaming each check as it is
// known, the report last. No logic here.
import { Elysia } from "elysia";
import { runDoctor, type DoctorDeps } from "../../doctor/index.ts";
import { opResponse, type RunningOps } from "../ops.ts";

export function doctorController(deps: DoctorDeps, running: RunningOps) {
  return new Elysia({ prefix: "/v1", tags: ["doctor"], normalize: false }).post(
    "/doctor",
    ({ request }) => opResponse("doctor", request, running, (report, signal) => runDoctor(deps, report, signal)),
    {
      detail: {
        summary: "Find out what this host can run, by booting a throwaway box per engine (NDJSON: progress and checks, then the report)",
      },
    },
  );
}
