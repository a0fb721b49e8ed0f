// `hutch schedule`: headless agent turns in a box on a cron expression or once
// at a time, kept and run by the daemon (host/src/schedule). Times and
// durations are read by the daemon, so a remote one uses its own clock.
import { AGENT_NAMES } from "@hutch/shared/base";
import type { Schedule } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { cell, printJson, table } from "./output.ts";

type AddArgs = GlobalArgs & {
  box: string;
  cron?: string;
  at?: string;
  agent: string;
  prompt: string;
  "max-run"?: string;
  "catch-up"?: "once" | "skip";
};
type IdArgs = GlobalArgs & { id: string };
type ListArgs = GlobalArgs & { box?: string };

const when = (s: Schedule) => (s.cron !== null ? `cron ${s.cron}` : `at ${s.at}`);

const last = (s: Schedule) =>
  s.lastRun
    ? `${s.lastRun.status}${s.lastRun.exit !== null ? ` (exit ${s.lastRun.exit})` : ""} ${s.lastRun.startedAt}${
        s.lastRun.session ? ` ${s.lastRun.session}` : ""
      }`
    : "-";

function details(s: Schedule): string {
  const rows: [string, string][] = [
    ["id", s.id],
    ["box", s.boxName],
    ["when", `${when(s)}${s.spreadS ? ` (+${s.spreadS}s spread for this box)` : ""}`],
    ["agent", s.agent],
    ["prompt", s.prompt.split("\n")[0]!.slice(0, 200)],
    ["state", s.state],
    ["next", s.nextAt ?? "-"],
    ["max-run", `${s.maxRunS}s`],
    ["catch-up", s.catchUp],
    ["runs", `${s.runs}${s.skipped ? ` (${s.skipped} skipped)` : ""}`],
    ["last", last(s)],
    ...(s.lastRun?.reason ? ([["reason", s.lastRun.reason]] as [string, string][]) : []),
  ];
  return `${rows.map(([k, v]) => `${`${k}:`.padEnd(10)}${cell(v)}`).join("\n")}\n`;
}

async function one(a: IdArgs, method: string, path: string, done: (s: Schedule) => string): Promise<void> {
  const d = await connectDaemon(a.home);
  const s = await d.request<Schedule>(method, `/v1/schedules/${encodeURIComponent(a.id)}${path}`);
  if (a.json) return printJson(s);
  process.stdout.write(done(s));
}

export const schedule = body<GlobalArgs>({
  demand: "name a schedule command",
  commands: [
    command<AddArgs>({
      command: "add <box>",
      describe: "run an agent headless in a box on a cron expression (--cron) or once (--at)",
      options: {
        cron: {
          type: "string",
          describe: 'five fields, minute hour day-of-month month day-of-week ("0 9 * * mon-fri"), or @hourly, @daily…',
        },
        at: { type: "string", describe: "once: an ISO time (2026-12-04T09:00:00Z) or a duration from now (+30m, 2h)" },
        agent: { type: "string", choices: AGENT_NAMES, default: "claude", describe: "the agent that runs the turn" },
        prompt: { type: "string", describe: "what the agent is asked each run" },
        "max-run": { type: "string", describe: "stop a run's turn after this long (90s, 15m, 2h)", defaultDescription: "30m" },
        "catch-up": {
          type: "string",
          choices: ["once", "skip"],
          describe: "runs whose time came while the daemon was down: run once when it is back, or skip them",
          defaultDescription: "once",
        },
      },
      examples: [
        ['$0 schedule add web --cron "0 7 * * mon-fri" --agent claude --prompt "triage new issues"', "weekday mornings"],
        ['$0 schedule add web --at +2h --prompt "check the deploy" --max-run 10m', "once, two hours from now"],
      ],
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const s = await d.request<Schedule>("POST", "/v1/schedules", {
          box: a.box,
          ...(a.cron !== undefined ? { cron: a.cron } : {}),
          ...(a.at !== undefined ? { at: a.at } : {}),
          agent: a.agent,
          prompt: a.prompt,
          ...(a["max-run"] !== undefined ? { maxRun: a["max-run"] } : {}),
          ...(a["catch-up"] !== undefined ? { catchUp: a["catch-up"] } : {}),
        });
        if (a.json) return printJson(s);
        process.stdout.write(`added ${s.id}: ${cell(when(s))} in box ${cell(s.boxName)}, next ${s.nextAt ?? "-"}\n`);
      },
    }),
    command<ListArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "list schedules, their next run and their last",
      options: { box: { type: "string", describe: "only this box's" } },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const list = await d.request<Schedule[]>("GET", `/v1/schedules${a.box ? `?box=${encodeURIComponent(a.box)}` : ""}`);
        if (a.json) return printJson(list);
        process.stdout.write(
          list.length === 0
            ? 'no schedules; add one: hutch schedule add BOX --cron "0 * * * *" --prompt TEXT\n'
            : table([
                ["ID", "BOX", "WHEN", "AGENT", "STATE", "NEXT", "LAST"],
                ...list.map((s) => [s.id, s.boxName, when(s), s.agent, s.state, s.nextAt ?? "-", last(s)]),
              ]),
        );
      },
    }),
    command<IdArgs>({
      command: "info <id>",
      describe: "a schedule in full",
      run: (a) => one(a, "GET", "", details),
    }),
    command<IdArgs>({
      command: "rm <id>",
      aliases: ["remove"],
      describe: "remove a schedule (a run in flight goes on to its end)",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const r = await d.request("DELETE", `/v1/schedules/${encodeURIComponent(a.id)}`);
        if (a.json) return printJson(r);
        process.stdout.write(`removed ${a.id}\n`);
      },
    }),
    command<IdArgs>({
      command: "pause <id>",
      describe: "no run until resumed",
      run: (a) => one(a, "POST", "/pause", (s) => `paused ${s.id}\n`),
    }),
    command<IdArgs>({
      command: "resume <id>",
      describe: "runs again from now (runs missed while paused are not caught up)",
      run: (a) => one(a, "POST", "/resume", (s) => `resumed ${s.id}, next ${s.nextAt ?? "-"}\n`),
    }),
    command<IdArgs>({
      command: "run <id>",
      describe: "run it now (whatever its state); prints the run's session",
      run: (a) =>
        one(a, "POST", "/run", (s) =>
          s.lastRun?.session
            ? `running ${s.id} in session ${s.lastRun.session}; watch it: hutch session watch ${s.lastRun.session}\n`
            : `${s.id} could not run: ${cell(s.lastRun?.reason ?? "see the daemon's log")}\n`,
        ),
    }),
  ],
});
