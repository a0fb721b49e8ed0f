import { AGENT_NAMES, HutchError } from "@hutch/shared/base";
import type { Session } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { attachSession } from "../client/exec.ts";
import { waitTurn } from "../client/turn.ts";
import { renderEntry } from "../client/transcript.ts";
import { body, type GlobalArgs } from "./args.ts";
import { setExitCode } from "./exit.ts";
import { cell, printJson } from "./output.ts";

type RunArgs = GlobalArgs & {
  box?: string;
  agent: string;
  prompt?: string;
  model?: string;
  detach: boolean;
  label?: string;
  permissions?: "ask" | "bypass";
};

export const run = body<RunArgs>({
  positionals: { box: { describe: "box name or id (default: a new box)" } },
  options: {
    agent: { type: "string", choices: AGENT_NAMES, default: "shell" },
    prompt: {
      alias: "p",
      type: "string",
      describe: "run the agent headless with this prompt; its messages, tool calls and usage become events",
    },
    model: { type: "string", describe: "model name passed to the agent" },
    permissions: {
      type: "string",
      choices: ["ask", "bypass"] as const,
      describe:
        "ask: the headless agent asks you (hutch approvals) before each tool call its own check holds; bypass (default): its prompts are off, the box is the sandbox",
    },
    detach: { alias: "d", type: "boolean", default: false, describe: "do not attach or wait; print the session id" },
    label: { type: "string" },
  },
  run: async (a) => {
    if (a.model && !a.prompt && a.agent === "shell")
      throw new HutchError("invalid", "--model needs an agent", "e.g. hutch run --agent claude --model NAME");
    const d = await connectDaemon(a.home);
    const s = await d.request<Session>("POST", "/v1/sessions", {
      ...(a.box ? { box: a.box } : {}),
      agent: a.agent,
      ...(a.label ? { label: a.label } : {}),
      ...(a.prompt !== undefined ? { prompt: a.prompt } : {}),
      ...(a.model ? { model: a.model } : {}),
      ...(a.permissions ? { permissions: a.permissions } : {}),
      cols: process.stdout.columns || 80,
      rows: process.stdout.rows || 24,
    });
    if (a.detach) {
      if (a.json) printJson(s);
      else process.stdout.write(`${s.id}\n`);
      return;
    }
    if (a.prompt !== undefined) {
      if (!a.json) process.stderr.write(`session ${s.id} in box ${s.boxName}: ${a.agent}, headless\n`);
      const partial = new Map<string, string>();
      const r = await waitTurn(d, s, (e) => {
        if (!a.json) for (const line of renderEntry(e, partial)) process.stdout.write(`${line}\n`);
      });
      if (a.json) printJson(r);
      else if (!r.ok)
        process.stderr.write(
          `hutch: the ${a.agent} turn ended in ${r.state ?? "an unknown state"}${r.reason ? `: ${cell(r.reason)}` : ""}\n  next: read it: hutch session transcript ${s.id}\n`,
        );
      setExitCode(r.ok ? 0 : 1);
      return;
    }
    process.stderr.write(`session ${s.id} in box ${s.boxName} (Ctrl-A d detaches)\n`);
    setExitCode(await attachSession(d, s.id, { steal: false, json: a.json }));
  },
});
