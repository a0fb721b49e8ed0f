import { DoctorReport, type HutchError, type DoctorCheck } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { runOp } from "../client/ops.ts";
import { progressDisplay } from "../client/progress.ts";
import { body, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";

const checkLine = (c: DoctorCheck) => `${c.ok ? "ok  " : "GAP "} ${c.name}: ${c.detail}${c.fix && !c.ok ? `\n     fix: ${c.fix}` : ""}\n`;

export const doctor = body<GlobalArgs>({
  run: async (a) => {
    let d: Awaited<ReturnType<typeof connectDaemon>>;
    try {
      d = await connectDaemon(a.home);
    } catch (err) {
      // No daemon, no other check: say so in the report's own shape.
      const daemon: DoctorCheck = {
        name: "daemon",
        ok: false,
        detail: (err as Error).message,
        ...((err as HutchError).hint ? { fix: (err as HutchError).hint } : {}),
      };
      if (a.json) process.stdout.write(`${JSON.stringify({ type: "result", value: { ok: false, checks: [daemon] } })}\n`);
      else process.stdout.write(`${checkLine(daemon)}this host cannot run boxes yet; fix the gaps above\n`);
      return setExitCode(1);
    }
    const display = a.json ? null : progressDisplay({ transientSteps: true });
    let report: DoctorReport;
    try {
      report = await runOp(d, "/v1/doctor", {}, DoctorReport, {
        line: (l) => a.json && process.stdout.write(`${JSON.stringify(l)}\n`),
        progress: (p) => {
          // Notes are for people, also with --json (on stderr, where logs go).
          if (a.json) return void (p.type === "note" && process.stderr.write(`hutch: ${p.text}\n`));
          display!.show(p);
          if (p.type === "check") display!.print(checkLine(p.check));
        },
      });
    } finally {
      display?.stop();
    }
    if (!a.json) process.stdout.write(report.ok ? "this host can run boxes\n" : "this host cannot run boxes yet; fix the gaps above\n");
    setExitCode(report.ok ? 0 : 1);
  },
});
