import { AGENT_NAMES, HutchError } from "@hutch/shared/base";
import type { Dispatch, DispatchWorker, SessionEvent } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";
import { count, terminalJson } from "@hutch/shared/text";
import { cell, printJson } from "./output.ts";

type DispatchArgs = GlobalArgs & {
  args?: string[];
  from?: string;
  here: boolean;
  k?: number;
  agent: string;
  agents?: string;
  check?: string;
  protect?: string[];
  pick: "first" | "best";
  concurrency?: number;
  timeout?: number;
};

/** What --json prints: the issue's shape, one line per worker. */
const summary = (d: Dispatch) => ({
  id: d.id,
  state: d.state,
  session: d.session,
  winner: d.winnerBox,
  winnerWorker: d.winner,
  ...(d.reason ? { reason: d.reason } : {}),
  tornDown: d.tornDown,
  usage: d.usage,
  workers: d.workers.map((w) => ({
    n: w.n,
    agent: w.agent,
    box: w.box,
    boxDeleted: w.boxDeleted,
    session: w.session,
    status: w.status,
    verdict: w.verdict,
    score: w.score,
    diffstat: w.diffstat,
    diff: w.diff,
    snapshot: w.snapshot,
    usage: w.usage,
  })),
});

const line = (w: DispatchWorker) =>
  `  worker ${w.n} ${w.agent.padEnd(8)} ${w.status.padEnd(9)}${w.score !== null ? ` score ${w.score}` : ""}${
    w.diffstat ? ` ${count(w.diffstat.files, "file")} +${w.diffstat.added} -${w.diffstat.removed}` : ""
  } box ${cell(w.box)}${w.boxDeleted ? " (deleted)" : ""}${w.session ? ` session ${w.session}` : ""}`;

function print(a: DispatchArgs, d: Dispatch, extra: Record<string, unknown> = {}, ndjson = false): void {
  // After the event lines of a run, the result is one more NDJSON line.
  if (a.json && ndjson) return void process.stdout.write(`${terminalJson({ ...summary(d), ...extra })}\n`);
  if (a.json) return printJson({ ...summary(d), ...extra });
  const head = `dispatch ${d.id}: ${d.state}${d.winner !== null ? `, worker ${d.winner} won (box ${d.winnerBox})` : ", no winner"}${
    d.reason ? ` — ${cell(d.reason)}` : ""
  }`;
  process.stdout.write(
    `${[head, ...d.workers.map(line), `usage: input ${d.usage.input}, output ${count(d.usage.output, "token")}`].join("\n")}\n`,
  );
}

export const dispatch = body<DispatchArgs>({
  positionals: { args: { describe: "the task (after --); or: status ID | list | cancel ID" } },
  options: {
    from: { type: "string", describe: "fork the workers from this snapshot" },
    here: { type: "boolean", default: false, describe: "offload this git work tree first, and bring the winner back into it" },
    k: { type: "number", describe: "how many workers" },
    agent: { type: "string", choices: AGENT_NAMES, default: "claude", describe: "the agent every worker runs" },
    agents: { type: "string", describe: "agents by worker, comma-separated, cycled (claude,codex)" },
    check: { type: "string", describe: "the shell command that grades a worker (exit 0 passes; a last line `score: N` scores)" },
    protect: { type: "string", array: true, describe: "a glob (from the work dir) restored from the base before grading (repeatable)" },
    pick: { type: "string", choices: ["first", "best"], default: "first", describe: "first to pass, or best score among those passing" },
    concurrency: { type: "number", describe: "workers at once (default: all k)" },
    timeout: { type: "number", describe: "seconds a worker's turn, and its check, may take" },
  },
  examples: [
    ['$0 dispatch --here -k 3 --agent claude --check "bun test" -- "make the tests pass"', "three tries, the first that passes comes home"],
    ["$0 dispatch status dsp_…", "a dispatch's workers, verdicts and winner"],
  ],
  run: async (a) => {
    const words = a.args ?? [];
    const d = await connectDaemon(a.home);
    if (a.check === undefined && (words[0] === "status" || words[0] === "cancel") && words.length === 2) {
      const r = await d.request<Dispatch>(
        words[0] === "status" ? "GET" : "POST",
        `/v1/dispatches/${encodeURIComponent(words[1]!)}${words[0] === "cancel" ? "/cancel" : ""}`,
      );
      return print(a, r);
    }
    if (a.check === undefined && words[0] === "list" && words.length === 1) {
      const list = await d.request<Dispatch[]>("GET", "/v1/dispatches");
      if (a.json) return printJson(list.map(summary));
      for (const x of list)
        process.stdout.write(
          `${x.id} ${x.state} ${x.workers.length} workers${x.winnerBox ? ` winner ${cell(x.winnerBox)}` : ""} session ${x.session}\n`,
        );
      return;
    }
    const task = words.join(" ").trim();
    if (!task) throw new HutchError("invalid", "no task given", 'put it after --: hutch dispatch --here -k 3 --check "bun test" -- "TASK"');
    if (a.check === undefined) throw new HutchError("invalid", "--check is required", 'name the grading command: --check "bun test"');
    if (a.k === undefined || !Number.isInteger(a.k) || a.k < 1)
      throw new HutchError("invalid", "-k needs a whole number of workers, 1 or more", "e.g. -k 3");
    const agents = (a.agents ?? a.agent).split(",").map((s) => s.trim());
    const bad = agents.find((x) => !(AGENT_NAMES as readonly string[]).includes(x));
    if (bad) throw new HutchError("invalid", `--agents: unknown agent "${bad}"`, `pick from: ${AGENT_NAMES.join(", ")}`);
    const { runDispatch } = await import("../dispatch/client.ts");
    const { renderEvent } = await import("../client/render.ts");
    const out = Bun.stdout.writer();
    const progress = (s: string) => process.stderr.write(`${s}\n`);
    const r = await runDispatch(
      d,
      {
        here: a.here,
        cwd: process.cwd(),
        ...(a.from ? { from: a.from } : {}),
        k: a.k,
        agents: agents as never,
        task,
        check: a.check,
        ...(a.protect ? { protect: a.protect } : {}),
        pick: a.pick,
        ...(a.concurrency !== undefined ? { concurrency: a.concurrency } : {}),
        ...(a.timeout !== undefined ? { timeout: a.timeout } : {}),
      },
      (e: SessionEvent) => {
        if (a.json) {
          out.write(`${terminalJson({ type: "event", event: e })}\n`);
          void out.flush();
        } else void renderEvent(d, e).then((t) => process.stderr.write(`${t}\n`));
      },
      progress,
    );
    await out.flush();
    print(a, r.dispatch, r.bringBack ? { bringBack: r.bringBack } : {}, true);
    if (!a.json && r.bringBack)
      process.stdout.write(
        `brought back: ${r.bringBack.case}${r.bringBack.files.length ? ` (${r.bringBack.files.map(cell).join(", ")})` : ""}\n`,
      );
    setExitCode(r.dispatch.winner !== null ? 0 : 1);
  },
});
